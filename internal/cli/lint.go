package cli

import (
	"flag"
	"fmt"
	"time"

	"github.com/cordon-sandbox/cordon/internal/lint"
	"github.com/cordon-sandbox/cordon/internal/probe"
	"github.com/cordon-sandbox/cordon/internal/version"
)

// lintCmd implements `cordon lint [--format text|json|sarif] [--reports DIR]
// [--fail-on error|warning] [PROFILE|DIR...]`: the known mistakes in the
// profiles (the embedded default without arguments). Exit status 1 when
// there is a finding as severe as --fail-on (an error, unless asked to
// fail on warnings too), 0 otherwise, 125 when cordon itself fails.
func lintCmd(e *env, args []string) int {
	fs := newFlags(e, "lint", "lint [flags] [PROFILE|DIR...]")
	format, reports, rules, failOn := lintFlags(fs)
	operands, err := parseAnywhere(fs, args)
	if err != nil {
		return fail(e, err)
	}
	if *format != "text" && *format != "json" && *format != "sarif" {
		return fail(e, fmt.Errorf("--format: %q is not text, json or sarif", *format))
	}
	if *failOn != string(lint.Error) && *failOn != string(lint.Warning) {
		return fail(e, fmt.Errorf("--fail-on: %q is not error or warning", *failOn))
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
		err = lint.WriteSARIF(e.stdout, findings, version.String())
	default:
		lint.WriteText(e.stdout, findings)
	}
	if err != nil {
		return fail(e, err)
	}
	for _, f := range findings {
		if f.Severity == lint.Error || *failOn == string(lint.Warning) {
			return 1
		}
	}
	return 0
}

// lintFlags registers cordon lint's flags.
func lintFlags(fs *flag.FlagSet) (format, reports *string, rules *bool, failOn *string) {
	format = fs.String("format", "text", "`FORMAT` of the findings: text, json or sarif")
	reports = fs.String("reports", probe.ReportDir(), "the `DIR` of probe reports recorded with cordon probe --record")
	rules = fs.Bool("rules", false, "list the rules and exit")
	failOn = fs.String("fail-on", string(lint.Error), "exit 1 on findings of this `SEVERITY` or worse: error, or warning")
	return format, reports, rules, failOn
}
