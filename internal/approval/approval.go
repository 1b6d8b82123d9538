// Package approval keeps the record that governance approved a profile:
// its canonical hash, who approved it and when, and the approved profile
// itself, so that what changed since can be named. A record lives beside its
// profile (agent.yaml: agent.approval.yaml), to be reviewed in version
// control with it.
package approval

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/cordon-sandbox/cordon/internal/capdiff"
	"github.com/cordon-sandbox/cordon/internal/hostfile"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// Record is one approval.
type Record struct {
	Agent         string    `yaml:"agent"`
	ProfileSHA256 string    `yaml:"profile_sha256"`
	ApprovedBy    string    `yaml:"approved_by"`
	ApprovedAt    time.Time `yaml:"approved_at"`
	// Profile is the approved profile, in effect (defaults filled in).
	Profile any `yaml:"profile"`
}

// PathFor is where the record of the profile at profilePath lives.
func PathFor(profilePath string) string {
	return strings.TrimSuffix(profilePath, filepath.Ext(profilePath)) + ".approval.yaml"
}

// Write records that by approved p (read from profilePath) at now.
func Write(profilePath string, p *profile.Profile, by string, now time.Time) (string, *Record, error) {
	if strings.TrimSpace(by) == "" {
		return "", nil, errors.New("an approval names who approved")
	}
	var snapshot any
	text, err := yaml.Marshal(p)
	if err == nil {
		err = yaml.Unmarshal(text, &snapshot)
	}
	if err != nil {
		return "", nil, fmt.Errorf("recording the profile: %w", err)
	}
	r := &Record{Agent: p.Agent, ProfileSHA256: p.Hash(), ApprovedBy: by, ApprovedAt: now.UTC().Truncate(time.Second), Profile: snapshot}
	out, err := yaml.Marshal(r)
	if err != nil {
		return "", nil, err
	}
	header := "# The approval of " + filepath.Base(profilePath) + ", written by `cordon approve`: the profile as\n# approved and its hash. Review it with the profile; do not edit it by hand.\n"
	path := PathFor(profilePath)
	if err := hostfile.WriteFile(path, append([]byte(header), out...), 0o644); err != nil {
		return "", nil, fmt.Errorf("writing the approval: %w", err)
	}
	return path, r, nil
}

// Load reads the record of the profile at profilePath and the profile it
// approved. It returns fs.ErrNotExist (wrapped) when there is none.
func Load(profilePath string) (*Record, *profile.Profile, error) {
	path := PathFor(profilePath)
	data, err := hostfile.ReadFile(path, 4<<20)
	if err != nil {
		return nil, nil, err
	}
	var r Record
	if err := yaml.Unmarshal(data, &r); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.ProfileSHA256 == "" || r.ApprovedBy == "" || r.ApprovedAt.IsZero() || r.Profile == nil {
		return nil, nil, fmt.Errorf("%s: not an approval record (profile_sha256, approved_by, approved_at and profile are required)", path)
	}
	text, err := yaml.Marshal(r.Profile)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	approved, err := profile.Parse(path+": profile", text)
	if err != nil {
		return nil, nil, err
	}
	return &r, approved, nil
}

// Status is how a profile stands against its approval.
type Status struct {
	// Record is the approval, nil when there is none.
	Record *Record
	// Current reports that the profile's hash is the approved one.
	Current bool
	// Changes are the capability changes since the approved profile.
	Changes []capdiff.Change
}

// Check compares p (read from profilePath, flags applied) with its approval.
func Check(profilePath string, p *profile.Profile) (Status, error) {
	r, approved, err := Load(profilePath)
	if errors.Is(err, fs.ErrNotExist) {
		return Status{}, nil
	}
	if err != nil {
		return Status{}, err
	}
	st := Status{Record: r, Current: r.ProfileSHA256 == p.Hash()}
	if !st.Current {
		st.Changes = capdiff.Diff(approved, p)
	}
	return st, nil
}

// Gate is what run and probe ask before building a sandbox: nil when the
// profile needs no approval, is the approved one, or changed only by
// reductions (returned as warnings); an error naming every expansion
// otherwise.
//
// Approval is sticky: once a profile has a record, every change is judged
// against the approved profile, whether or not the profile still asks for
// approval, so dropping governance.require_approval together with an
// expansion is caught as the expansion.
func Gate(profilePath string, p *profile.Profile) (warnings []string, err error) {
	if profilePath == "" {
		return nil, nil
	}
	required := p.Governance != nil && p.Governance.RequireApproval
	if !required {
		if _, err := os.Lstat(PathFor(profilePath)); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
	}
	st, err := Check(profilePath, p)
	if err != nil {
		return nil, err
	}
	if st.Record == nil {
		return nil, fmt.Errorf("%s requires approval and has none (%s): review it, then run cordon approve %s --by NAME", profilePath, PathFor(profilePath), profilePath)
	}
	if st.Current {
		return nil, nil
	}
	if exp := capdiff.Expansions(st.Changes); len(exp) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "%s grew since %s approved it on %s; approve it again after review (cordon approve %s --by NAME):", profilePath, st.Record.ApprovedBy, st.Record.ApprovedAt.Format("2006-01-02"), profilePath)
		for _, c := range exp {
			fmt.Fprintf(&b, "\n  + %s: %s", c.Field, c.Message)
		}
		return nil, errors.New(b.String())
	}
	for _, c := range st.Changes {
		warnings = append(warnings, fmt.Sprintf("%s changed since its approval, within it: %s: %s", profilePath, c.Field, c.Message))
	}
	if len(st.Changes) == 0 {
		warnings = append(warnings, fmt.Sprintf("%s changed since its approval, but no capability did", profilePath))
	}
	return warnings, nil
}
