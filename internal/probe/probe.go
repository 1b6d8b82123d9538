// Package probe is cordon's escape-probe battery: attempts to reach past the
// sandbox's boundary, run inside a sandbox built exactly as `cordon run`
// builds one, each reporting whether the boundary held. The probes are
// compiled into cordon (the hidden subcommand `__probe`), so the probed host
// needs nothing else. Targets outside the sandbox (a canary file, a canary
// environment variable, a loopback service) are planted by the host side,
// which tells the probes where they are, never what secret they hold.
package probe

import (
	"encoding/json"
	"io"
	"os"
	"slices"
	"strings"
)

// Status is what happened to one attempt.
type Status string

// Statuses.
const (
	Contained Status = "contained"
	Escaped   Status = "escaped"
	Error     Status = "error"
)

// Probe is one attempt.
type Probe struct {
	ID       string
	Category string
	// Attempt says what the probe tries; Expect what must happen.
	Attempt string
	Expect  string
	Run     func(t *Targets) (Status, string)
}

// Result is one probe's outcome, with its evidence (an errno, bytes read,
// an address reached).
type Result struct {
	ID       string `json:"id"`
	Category string `json:"category"`
	Attempt  string `json:"attempt"`
	Expect   string `json:"expect"`
	Status   Status `json:"status"`
	Evidence string `json:"evidence"`
}

// Targets are what the host side planted outside the sandbox.
type Targets struct {
	// CanaryFile is a host file, readable by anyone on the host, that the
	// sandbox must not see.
	CanaryFile string `json:"canary_file"`
	// CanaryEnv names a variable set in cordon's own environment; its
	// value's SHA-256 is CanaryEnvSHA256.
	CanaryEnv       string `json:"canary_env"`
	CanaryEnvSHA256 string `json:"canary_env_sha256"`
	// LoopbackAddr is a TCP service on the host's loopback.
	LoopbackAddr string `json:"loopback_addr"`
	// AbstractSocket is a unix socket in the host's abstract namespace.
	AbstractSocket string `json:"abstract_socket"`
	// SysVKey is the key of a System V shared memory segment on the host.
	SysVKey int `json:"sysv_key"`
	// HostHostname is the host's name.
	HostHostname string `json:"host_hostname"`
	// UDPAddr is a UDP service on the host's loopback that echoes.
	UDPAddr string `json:"udp_addr"`
	// AllowedAddr is a TCP service on the host's loopback that the egress
	// probes' profile allows; it answers "cordon-canary" to what it reads.
	AllowedAddr string `json:"allowed_addr,omitempty"`
}

// EnvVar carries the Targets, as JSON, to the probes inside.
const EnvVar = "CORDON_PROBE_TARGETS"

// Select returns the probes of category (all when empty).
func Select(all []Probe, category string) []Probe {
	var out []Probe
	for _, p := range all {
		if category == "" || p.Category == category {
			out = append(out, p)
		}
	}
	return out
}

// RunAll runs the probes and writes one JSON line per result to w.
func RunAll(probes []Probe, t *Targets, w io.Writer) {
	enc := json.NewEncoder(w)
	for _, p := range probes {
		status, evidence := p.Run(t)
		enc.Encode(Result{ID: p.ID, Category: p.Category, Attempt: p.Attempt, Expect: p.Expect, Status: status, Evidence: evidence})
	}
}

// Main is the hidden subcommand run inside the sandbox:
// `__probe [--egress] [--only CATEGORY]` runs the battery (or the egress
// battery), `__probe --attack NAME [ARG...]` one attack of a host-side probe.
func Main(args []string) int {
	if len(args) > 0 && args[0] == "--attack" {
		return Attack(args[1:])
	}
	battery := Battery()
	if len(args) > 0 && args[0] == "--egress" {
		battery, args = EgressBattery(), args[1:]
	}
	var t Targets
	if err := json.Unmarshal([]byte(os.Getenv(EnvVar)), &t); err != nil {
		os.Stderr.WriteString("probe: no targets: " + err.Error() + "\n")
		return 2
	}
	category := ""
	if len(args) == 2 && args[0] == "--only" {
		category = args[1]
	}
	RunAll(Select(battery, category), &t, os.Stdout)
	return 0
}

// Contained reports whether every result held.
func AllContained(rs []Result) bool {
	for _, r := range rs {
		if r.Status != Contained {
			return false
		}
	}
	return len(rs) > 0
}

// Parse reads the JSON lines RunAll wrote.
func Parse(r io.Reader) ([]Result, error) {
	var out []Result
	dec := json.NewDecoder(r)
	for {
		var res Result
		if err := dec.Decode(&res); err == io.EOF {
			return out, nil
		} else if err != nil {
			return out, err
		}
		out = append(out, res)
	}
}

// ProbeArg is the hidden subcommand that runs probes inside a sandbox.
const ProbeArg = "__probe"

// AllCategories are the categories of every battery, in the order of
// THREATS.md.
var AllCategories = []string{"filesystem", "processes", "namespaces", "network", "resources", "lifecycle", "host", "agent"}

// Order sorts results by category, keeping the batteries' order within one.
func Order(rs []Result) {
	slices.SortStableFunc(rs, func(a, b Result) int {
		return slices.Index(AllCategories, a.Category) - slices.Index(AllCategories, b.Category)
	})
}

func trim(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
