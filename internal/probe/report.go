package probe

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/cordon-sandbox/cordon/internal/config"
	"github.com/cordon-sandbox/cordon/internal/hostfile"
)

// Report is the whole account of one battery run, comparable across runs
// and hosts (docs/probe.schema.json).
type Report struct {
	Cordon string    `json:"cordon_version"`
	Time   time.Time `json:"time"`
	Host   Host      `json:"host"`
	// ProfileSHA256 is the profile's canonical hash (profile.Hash), with
	// the command-line adjustments applied.
	ProfileSHA256 string `json:"profile_sha256"`
	// Only is the category the battery was limited to; empty for all.
	Only    string   `json:"only,omitempty"`
	Results []Result `json:"results"`
	Summary Summary  `json:"summary"`
}

// Host fingerprints where the battery ran.
type Host struct {
	Name        string `json:"name"`
	Kernel      string `json:"kernel"`
	Arch        string `json:"arch"`
	Root        bool   `json:"root"`
	LandlockABI int    `json:"landlock_abi"`
	Cgroup      string `json:"cgroup"`
}

// Summary counts the results by status.
type Summary struct {
	Total     int `json:"total"`
	Contained int `json:"contained"`
	Escaped   int `json:"escaped"`
	Error     int `json:"error"`
}

// Summarize counts results.
func Summarize(rs []Result) Summary {
	s := Summary{Total: len(rs)}
	for _, r := range rs {
		switch r.Status {
		case Contained:
			s.Contained++
		case Escaped:
			s.Escaped++
		default:
			s.Error++
		}
	}
	return s
}

// LoadReport reads a report written with --json.
func LoadReport(path string) (*Report, error) {
	b, err := hostfile.ReadFile(path, 0)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: not a probe report: %w", path, err)
	}
	return &r, nil
}

// ReportDir is where `cordon probe --record` keeps reports on this host:
// probes in cordon's state directory ($CORDON_STATE_DIR, else
// $XDG_STATE_HOME/cordon, else ~/.local/state/cordon).
func ReportDir() string { return filepath.Join(config.StateDir(), "probes") }

// Save writes r into dir, named by its profile's hash (a later report of the
// same profile replaces it).
func (r *Report) Save(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, r.ProfileSHA256+".json")
	return path, hostfile.WriteFile(path, append(b, '\n'), 0o644)
}

// Find reads the report of the profile whose hash is given from dir; nil
// when there is none.
func Find(dir, hash string) (*Report, error) {
	r, err := LoadReport(filepath.Join(dir, hash+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return r, err
}

// Change is a probe whose status differs between two reports; an empty
// status means the probe is missing from that report.
type Change struct {
	ID       string `json:"id"`
	Old, New Status
}

// Compare lists the probes whose status changed from old to new.
func Compare(old, new []Result) []Change {
	was := map[string]Status{}
	for _, r := range old {
		was[r.ID] = r.Status
	}
	is := map[string]Status{}
	for _, r := range new {
		is[r.ID] = r.Status
	}
	var out []Change
	for id, s := range is {
		if was[id] != s {
			out = append(out, Change{ID: id, Old: was[id], New: s})
		}
	}
	for id, s := range was {
		if _, ok := is[id]; !ok {
			out = append(out, Change{ID: id, Old: s})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// WriteChanges prints the changes, one line each.
func WriteChanges(w io.Writer, cs []Change) {
	name := func(s Status) string {
		if s == "" {
			return "(absent)"
		}
		return string(s)
	}
	for _, c := range cs {
		fmt.Fprintf(w, "changed: %s: %s -> %s\n", c.ID, name(c.Old), name(c.New))
	}
	if len(cs) == 0 {
		fmt.Fprintln(w, "no probe changed")
	}
}
