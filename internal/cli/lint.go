package cli

import (
	"flag"
	"fmt"
	"time"

	"github.com/cordon-sandbox/cordon/internal/lint"
	"github.com/cordon-sandbox/cordon/internal/probe"
)

// lintCmd implements `cordon lint [--format text|json|sarif] [--reports DIR]
// [PROFILE|DIR...]`: the known mistakes in the profiles (the embedded
// default without arguments). Exit status 0 when there is no finding, 1
// when there are, 125 when cordon itself fails.
func lintCmd(e *env, args []string) int {
	fs := newFlags(e, "lint", "lint [flags] [PROFILE|DIR...]")
	format, reports, rules := lintFlags(fs)
	operands, err := parseAnywhere(fs, args)
	if err != nil {
		return fail(e, err)
	}
	if *format != "text" && *format != "json" && *format != "sarif" {
		return fail(e, fmt.Errorf("--format: %q is not text, json or sarif", *format))
	}
	if *rules {
		for _, r := range lint.Rules() {
			fmt.Fprintf(e.stdout, "%s %-28s %-7s %s\n", r.Code, r.Name, r.Severity, r.Summary)
		}
		return 0
	}
	c, findings, err := lint.Gather(operands, *reports)
	if err != nil {
		return fail(e, err)
	}
	c.Now, c.Host = time.Now(), probeHost()
	th := e.host()
	c.Toolchains = &th
	findings = append(findings, lint.Run(c)...)
	switch *format {
	case "json":
		err = lint.WriteJSON(e.stdout, findings)
	case "sarif":
		err = lint.WriteSARIF(e.stdout, findings, Version)
	default:
		lint.WriteText(e.stdout, findings)
	}
	if err != nil {
		return fail(e, err)
	}
	if len(findings) > 0 {
		return 1
	}
	return 0
}

// lintFlags registers cordon lint's flags.
func lintFlags(fs *flag.FlagSet) (format, reports *string, rules *bool) {
	format = fs.String("format", "text", "`FORMAT` of the findings: text, json or sarif")
	reports = fs.String("reports", probe.ReportDir(), "the `DIR` of probe reports recorded with cordon probe --record")
	rules = fs.Bool("rules", false, "list the rules and exit")
	return format, reports, rules
}
