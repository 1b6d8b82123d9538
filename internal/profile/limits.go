package profile

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Kind is what a limit measures, and so how its value is written.
type Kind int

// Kinds of limits.
const (
	Duration Kind = iota + 1 // "30s", "1.5m", "2h", or seconds
	Bytes                    // "512MiB", "1.5GiB", or bytes
	Count                    // a whole number
	Cores                    // "1.5": CPU cores, to 1/1000
)

// Unlimited is the value that lifts a limit, where that is allowed.
const Unlimited = "unlimited"

// LimitSpec describes one limit of the resources block.
type LimitSpec struct {
	Name    string
	Kind    Kind
	Default string
	// Min is the smallest value accepted, in the kind's unit (nanoseconds,
	// bytes, a count, millicores).
	Min int64
	// CanLift says whether "unlimited" is accepted.
	CanLift bool
	Doc     string
}

// Limits lists every limit, in the order they are documented.
var Limits = []LimitSpec{
	{"wall", Duration, "10m", int64(10 * time.Millisecond), true, "wall-clock time of the whole run"},
	{"cpu_time", Duration, "10m", int64(time.Second), true, "CPU time, user and system, of each process (rlimit) and of the whole sandbox (cgroup)"},
	{"cpus", Cores, "2", 10, true, "CPU bandwidth, in cores"},
	{"memory", Bytes, "2GiB", 4 << 20, true, "memory of the whole sandbox, swap included"},
	{"pids", Count, "512", 16, true, "processes and threads of the whole sandbox, cordon's init included"},
	{"open_files", Count, "1024", 16, false, "open file descriptors of each process"},
	{"file_size", Bytes, "1GiB", 1 << 10, true, "size of any file a process writes"},
	{"tmp_size", Bytes, "256MiB", 1 << 20, false, "size of /tmp, of /dev/shm and of the home directory, each a tmpfs"},
	{"output", Bytes, "64MiB", 1 << 10, true, "bytes the command writes to stdout and stderr together"},
	{"workspace_size", Bytes, "1GiB", 1 << 20, false, "bytes the sandbox may write to a workspace in review mode (its copy-on-write layer, a tmpfs)"},
	{"workspace_inodes", Count, "100000", 64, false, "files, directories and links the sandbox may create in a workspace in review mode"},
	{"cache_size", Bytes, "4GiB", 1 << 20, true, "bytes the agent's caches (caches:) hold together across its runs, and one file, directory or link for each 4 KiB of it"},
}

// LimitByName returns the spec of a limit.
func LimitByName(name string) (LimitSpec, bool) {
	for _, l := range Limits {
		if l.Name == name {
			return l, true
		}
	}
	return LimitSpec{}, false
}

// Quantity is the value of one limit as written, and as understood once
// validated: N in the kind's unit (nanoseconds, bytes, a count, millicores),
// or Unlimited.
type Quantity struct {
	N         int64
	Unlimited bool
	kind      Kind
	text      string
}

// UnmarshalText keeps the text; validation parses it, so that a bad value is
// reported where it was written.
func (q *Quantity) UnmarshalText(b []byte) error {
	*q = Quantity{text: string(b)}
	return nil
}

// UnmarshalYAML keeps the scalar's text, as UnmarshalText does; the YAML
// decoder would otherwise print the node and parse it again for
// UnmarshalText, which is most of the time it takes to load a profile.
func (q *Quantity) UnmarshalYAML(unmarshal func(any) error) error {
	var text string
	if err := unmarshal(&text); err != nil {
		return err
	}
	*q = Quantity{text: text}
	return nil
}

// MarshalText prints the value in its canonical form.
func (q Quantity) MarshalText() ([]byte, error) { return []byte(q.String()), nil }

// IsZero reports an unset quantity, which YAML output leaves out.
func (q Quantity) IsZero() bool { return !q.Unlimited && q.N == 0 && q.text == "" }

// Set reports whether the quantity was given (in the profile, by default or
// on the command line) and limits something.
func (q Quantity) Set() bool { return !q.Unlimited && q.N > 0 }

// String prints the value in its canonical form.
func (q Quantity) String() string {
	if q.Unlimited {
		return Unlimited
	}
	switch q.kind {
	case Duration:
		return formatDuration(time.Duration(q.N))
	case Bytes:
		return FormatSize(q.N)
	case Count:
		return strconv.FormatInt(q.N, 10)
	case Cores:
		return strconv.FormatFloat(float64(q.N)/1000, 'f', -1, 64)
	}
	return q.text
}

// Duration returns a Duration-kind quantity as a time.Duration.
func (q Quantity) Duration() time.Duration { return time.Duration(q.N) }

// parseQuantity reads text as a value of spec's kind.
func parseQuantity(spec LimitSpec, text string) (Quantity, error) {
	q := Quantity{kind: spec.Kind, text: text}
	t := strings.TrimSpace(text)
	if t == Unlimited {
		if !spec.CanLift {
			return q, fmt.Errorf("%s cannot be unlimited", spec.Name)
		}
		q.Unlimited = true
		return q, nil
	}
	var err error
	switch spec.Kind {
	case Duration:
		q.N, err = parseDuration(t)
	case Bytes:
		q.N, err = ParseSize(t)
	case Count:
		q.N, err = strconv.ParseInt(t, 10, 64)
		if err != nil {
			err = fmt.Errorf("%q is not a whole number", text)
		}
	case Cores:
		var f float64
		f, err = strconv.ParseFloat(t, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f > 1e6 {
			err = fmt.Errorf("%q is not a number of cores (write e.g. 1.5)", text)
		}
		q.N = int64(math.Round(f * 1000))
	}
	if err != nil {
		return q, err
	}
	if q.N < spec.Min {
		min := Quantity{N: spec.Min, kind: spec.Kind}
		return q, fmt.Errorf("%s is below the smallest %s, %s", strings.TrimSpace(text), spec.Name, min)
	}
	return q, nil
}

// parseDuration reads "30s", "1.5m", "2h", "250ms" or a number of seconds.
func parseDuration(t string) (int64, error) {
	if f, err := strconv.ParseFloat(t, 64); err == nil {
		if f < 0 || math.IsNaN(f) || f > 1e9 {
			return 0, fmt.Errorf("%q is not a duration", t)
		}
		return int64(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(t)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration (write e.g. 30s, 1.5m, 2h)", t)
	}
	return int64(d), nil
}

// formatDuration prints d in the largest unit that divides it.
func formatDuration(d time.Duration) string {
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d >= u.unit && d%u.unit == 0 {
			return strconv.FormatInt(int64(d/u.unit), 10) + u.name
		}
	}
	return d.String()
}

// Resources holds the limits of the sandbox. Every limit has a default; see
// Limits.
type Resources struct {
	Wall      Quantity `yaml:"wall" json:"wall"`
	CPUTime   Quantity `yaml:"cpu_time" json:"cpu_time"`
	CPUs      Quantity `yaml:"cpus" json:"cpus"`
	Memory    Quantity `yaml:"memory" json:"memory"`
	Pids      Quantity `yaml:"pids" json:"pids"`
	OpenFiles Quantity `yaml:"open_files" json:"open_files"`
	FileSize  Quantity `yaml:"file_size" json:"file_size"`
	TmpSize   Quantity `yaml:"tmp_size" json:"tmp_size"`
	Output    Quantity `yaml:"output" json:"output"`
	// WorkspaceSize and WorkspaceInodes bound the copy-on-write layer of
	// a workspace in review mode.
	WorkspaceSize   Quantity `yaml:"workspace_size" json:"workspace_size"`
	WorkspaceInodes Quantity `yaml:"workspace_inodes" json:"workspace_inodes"`
	// CacheSize bounds the agent's caches (Profile.Caches), together.
	CacheSize Quantity `yaml:"cache_size" json:"cache_size"`
}

// Get returns the quantity of the named limit.
func (r *Resources) Get(name string) *Quantity {
	switch name {
	case "wall":
		return &r.Wall
	case "cpu_time":
		return &r.CPUTime
	case "cpus":
		return &r.CPUs
	case "memory":
		return &r.Memory
	case "pids":
		return &r.Pids
	case "open_files":
		return &r.OpenFiles
	case "file_size":
		return &r.FileSize
	case "tmp_size":
		return &r.TmpSize
	case "output":
		return &r.Output
	case "workspace_size":
		return &r.WorkspaceSize
	case "workspace_inodes":
		return &r.WorkspaceInodes
	case "cache_size":
		return &r.CacheSize
	}
	return nil
}

// SetLimit sets a limit from the command line (--limit NAME=VALUE).
func (p *Profile) SetLimit(name, value string) error {
	spec, ok := LimitByName(name)
	if !ok {
		return fmt.Errorf("unknown limit %q (known: %s)", name, limitNames())
	}
	q, err := parseQuantity(spec, value)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	*p.Resources.Get(name) = q
	return nil
}

func limitNames() string {
	names := make([]string, len(Limits))
	for i, l := range Limits {
		names[i] = l.Name
	}
	return strings.Join(names, ", ")
}

// validateResources parses every limit, filling defaults for those not
// written.
func (p *Profile) validateResources(bad func(field, format string, args ...any)) {
	for _, spec := range Limits {
		q := p.Resources.Get(spec.Name)
		text := q.text
		if text == "" && q.N == 0 && !q.Unlimited {
			text = spec.Default
		} else if text == "" {
			q.kind = spec.Kind // already parsed (set in code)
			continue
		}
		v, err := parseQuantity(spec, text)
		if err != nil {
			bad("resources."+spec.Name, "%v", err)
			continue
		}
		*q = v
	}
}
