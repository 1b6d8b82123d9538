package lint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/approval"
	"github.com/cordon-sandbox/cordon/internal/probe"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// Gather reads the profiles named by args (files, or directories whose
// *.yaml and *.yml files are profiles; the embedded default when args is
// empty) with their approval records and the probe reports recorded in
// reports. A profile that does not load is a finding, not an error; the
// Context's Now and Host are left for the caller.
func Gather(args []string, reports string) (*Context, []Finding, error) {
	files, err := profileFiles(args)
	if err != nil {
		return nil, nil, err
	}
	c := &Context{}
	var findings []Finding
	if len(args) == 0 {
		c.Targets = append(c.Targets, target("", profile.Default(), reports))
	}
	for _, f := range files {
		p, err := profile.LoadFile(f)
		var perrs profile.Errors
		switch {
		case errors.As(err, &perrs):
			findings = append(findings, Invalid(f, perrs)...)
			continue
		case err != nil:
			return nil, nil, err
		}
		c.Targets = append(c.Targets, target(f, p, reports))
	}
	return c, findings, nil
}

// target gathers what the rules look at around one profile.
func target(path string, p *profile.Profile, reports string) *Target {
	t := &Target{Path: path, Profile: p}
	if path != "" {
		t.Approval, t.ApprovalErr = approval.Check(path, p)
	}
	t.Report, _ = probe.Find(reports, p.Hash())
	return t
}

// profileFiles expands the arguments: files as they are, directories to
// the profiles directly in them (approval records left out).
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
