package lint

import "github.com/cordon-sandbox/cordon/internal/profile"

// InvalidCode is the code of a profile that does not load; the loader finds
// these, not a check.
const InvalidCode = "CL001"

func init() {
	register(Rule{
		Code: InvalidCode, Name: "invalid-profile", Severity: Error,
		Summary: "the profile does not load: cordon would refuse to run it",
		Why:     "a profile cordon cannot read grants nothing and protects nothing",
		Fix:     "correct the field as the message says (docs/PROFILES.md describes every field)",
	})
}

// Invalid turns a profile's load errors into findings.
func Invalid(path string, errs profile.Errors) []Finding {
	r := registry[InvalidCode]
	var out []Finding
	for _, e := range errs {
		fix := r.Fix
		if e.Fix != "" {
			fix = e.Fix
		}
		out = append(out, Finding{Code: r.Code, Rule: r.Name, Severity: r.Severity, File: path, Line: e.Line, Col: e.Col, Field: e.Field, Message: e.Msg, Fix: fix})
	}
	return out
}
