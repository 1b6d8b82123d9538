package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/approval"
	"github.com/cordon-sandbox/cordon/internal/lint"
	"github.com/cordon-sandbox/cordon/internal/probe"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// lintCmd implements `cordon lint [--format text|json|sarif] [--reports DIR]
// [PROFILE|DIR...]`: the known mistakes in the profiles (the embedded
// default without arguments). Exit status 0 when there is no finding, 1
// when there are, 125 when cordon itself fails.
func lintCmd(e *env, args []string) int {
	fs := newFlags(e, "lint", "lint [flags] [PROFILE|DIR...]")
	format := fs.String("format", "text", "`FORMAT` of the findings: text, json or sarif")
	reports := fs.String("reports", probe.ReportDir(), "the `DIR` of probe reports recorded with cordon probe --record")
	rules := fs.Bool("rules", false, "list the rules and exit")
	if err := fs.Parse(args); err != nil {
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
	files, err := profileFiles(fs.Args())
	if err != nil {
		return fail(e, err)
	}
	c := &lint.Context{Now: time.Now(), Host: probeHost()}
	var findings []lint.Finding
	if len(files) == 0 {
		c.Targets = append(c.Targets, lintTarget("", profile.Default(), *reports))
	}
	for _, f := range files {
		p, err := profile.LoadFile(f)
		var perrs profile.Errors
		switch {
		case errors.As(err, &perrs):
			findings = append(findings, lint.Invalid(f, perrs)...)
			continue
		case err != nil:
			return fail(e, err)
		}
		c.Targets = append(c.Targets, lintTarget(f, p, *reports))
	}
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

// lintTarget gathers what the rules look at around one profile.
func lintTarget(path string, p *profile.Profile, reports string) *lint.Target {
	t := &lint.Target{Path: path, Profile: p}
	if path != "" {
		t.Approval, t.ApprovalErr = approval.Check(path, p)
	}
	t.Report, _ = probe.Find(reports, p.Hash())
	return t
}

// profileFiles expands the arguments: files as they are, directories to
// the profiles directly in them (*.yaml, *.yml; approval records left out).
func profileFiles(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			out = append(out, a)
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		var found []string
		for _, e := range ents {
			n := e.Name()
			if e.IsDir() || strings.HasSuffix(n, ".approval.yaml") || (filepath.Ext(n) != ".yaml" && filepath.Ext(n) != ".yml") {
				continue
			}
			found = append(found, filepath.Join(a, n))
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no profiles (*.yaml, *.yml) in it", a)
		}
		sort.Strings(found)
		out = append(out, found...)
	}
	return out, nil
}
