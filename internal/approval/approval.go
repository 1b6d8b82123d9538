// Package approval keeps the record that governance approved a profile:
// its canonical hash, who approved it and when, and the approved profile
// itself, so that what changed since can be named.
//
// The record that counts is the one cordon keeps in its state directory
// (STATE/profile-approvals/), outside every sandbox's view, keyed by the
// profile's absolute path: only that one vouches for a profile (Gate,
// CheckTrusted). A copy lives beside the profile (agent.yaml:
// agent.approval.yaml), to be reviewed in version control with it; it is a
// copy for people and the linter, never trusted, since whatever could
// rewrite the profile (a sandbox whose workspace holds it) could rewrite
// the copy to match.
package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/cordon-sandbox/cordon/internal/capdiff"
	"github.com/cordon-sandbox/cordon/internal/config"
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
	trusted, err := trustedPath(profilePath)
	if err != nil {
		return "", nil, err
	}
	if err := os.MkdirAll(filepath.Dir(trusted), 0o700); err != nil {
		return "", nil, fmt.Errorf("keeping the approval: %w", err)
	}
	if err := hostfile.WriteFile(trusted, append([]byte(header), out...), 0o600); err != nil {
		return "", nil, fmt.Errorf("keeping the approval: %w", err)
	}
	path := PathFor(profilePath)
	if err := hostfile.WriteFile(path, append([]byte(header), out...), 0o644); err != nil {
		return "", nil, fmt.Errorf("writing the approval: %w", err)
	}
	return path, r, nil
}

// StateDir is where the trusted records are kept: STATE/profile-approvals.
// A variable for tests.
var StateDir = func() string { return filepath.Join(config.StateDir(), "profile-approvals") }

// trustedPath is where cordon's state keeps the record of the profile at
// profilePath: named by the SHA-256 of its absolute, clean path.
func trustedPath(profilePath string) (string, error) {
	abs, err := filepath.Abs(profilePath)
	if err != nil {
		return "", fmt.Errorf("the approval of %s: %w", profilePath, err)
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(StateDir(), hex.EncodeToString(sum[:16])+".yaml"), nil
}

// Load reads the copy of the record beside the profile at profilePath and
// the profile it approved. It returns fs.ErrNotExist (wrapped) when there
// is none. The copy is for people: it vouches for nothing.
func Load(profilePath string) (*Record, *profile.Profile, error) {
	return load(PathFor(profilePath))
}

// LoadTrusted reads the record cordon's state keeps of the profile at
// profilePath, fs.ErrNotExist (wrapped) when there is none.
func LoadTrusted(profilePath string) (*Record, *profile.Profile, error) {
	path, err := trustedPath(profilePath)
	if err != nil {
		return nil, nil, err
	}
	return load(path)
}

func load(path string) (*Record, *profile.Profile, error) {
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

// Check compares p (read from profilePath, flags applied) with the copy of
// its approval beside it, as a person reviewing both would.
func Check(profilePath string, p *profile.Profile) (Status, error) {
	return check(p, func() (*Record, *profile.Profile, error) { return Load(profilePath) })
}

// CheckTrusted compares p (read from profilePath, flags applied) with the
// approval cordon's state keeps of it.
func CheckTrusted(profilePath string, p *profile.Profile) (Status, error) {
	return check(p, func() (*Record, *profile.Profile, error) { return LoadTrusted(profilePath) })
}

func check(p *profile.Profile, load func() (*Record, *profile.Profile, error)) (Status, error) {
	r, approved, err := load()
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

// Governed reports whether the profile at profilePath is under approval:
// it asks for it, or cordon's state keeps a record of it.
func Governed(profilePath string, p *profile.Profile) bool {
	if p.Governance != nil && p.Governance.RequireApproval {
		return true
	}
	if profilePath == "" {
		return false
	}
	_, _, err := LoadTrusted(profilePath)
	return !errors.Is(err, fs.ErrNotExist)
}

// Gate is what run and probe ask before building a sandbox: nil when the
// profile needs no approval, is the approved one, or changed only by
// reductions (returned as warnings); an error naming every expansion
// otherwise. Only the record cordon's state keeps counts; a copy beside
// the profile that differs from it is named in a warning and ignored.
//
// Approval is sticky: once a profile has a record, every change is judged
// against the approved profile, whether or not the profile still asks for
// approval, so dropping governance.require_approval together with an
// expansion is caught as the expansion.
func Gate(profilePath string, p *profile.Profile) (warnings []string, err error) {
	if profilePath == "" {
		return nil, nil
	}
	st, err := CheckTrusted(profilePath, p)
	if err != nil {
		return nil, err
	}
	copied, _, copyErr := Load(profilePath)
	if copyErr == nil && (st.Record == nil || copied.ProfileSHA256 != st.Record.ProfileSHA256 || copied.ApprovedBy != st.Record.ApprovedBy) {
		warnings = append(warnings, fmt.Sprintf("%s is not the approval this host's cordon recorded for %s (kept in %s); it is ignored", PathFor(profilePath), profilePath, StateDir()))
	}
	required := p.Governance != nil && p.Governance.RequireApproval
	if st.Record == nil {
		if !required {
			return warnings, nil
		}
		return nil, fmt.Errorf("%s requires approval and has none (%s): review it, then run cordon approve %s --by NAME; a record beside the profile vouches for nothing unless this host's cordon wrote it", profilePath, PathFor(profilePath), profilePath)
	}
	if st.Current {
		return warnings, nil
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
