package probe

import (
	"context"
	"io"
	"net/netip"
	"os/exec"

	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// Runner runs an attack (`cordon __probe --attack ARGS`) in a sandbox built
// from a profile, as cordon run would.
type Runner interface {
	// Run runs it from this process and returns the outcome; what the
	// attack prints goes to stdout.
	Run(p *profile.Profile, attack []string, stdout io.Writer) (outcome.Outcome, error)
	// Start runs it under a separate cordon process, the sandbox's
	// supervisor, which the caller may kill.
	Start(p *profile.Profile, attack []string, stdout io.Writer) (*exec.Cmd, error)
	// Sweep removes, as the next cordon to start does, what the cordon
	// processes killed before left of their sandboxes of p (see package
	// journal).
	Sweep(p *profile.Profile)
	// Exec runs it as Run does, with what the probes of cordon's own host
	// side need.
	Exec(x Exec) (outcome.Outcome, error)
}

// Exec is one attack run by Runner.Exec.
type Exec struct {
	Profile *profile.Profile
	Attack  []string
	// Stdout gets what the attack prints; Stderr what reaches the run's
	// stderr, cordon's own lines included (nil drops them).
	Stdout, Stderr io.Writer
	// Guard are host files the sandbox must not change (see
	// sandbox.Options.Guard).
	Guard []string
	// Resolve, when set, stands in for the host's resolver in the egress
	// proxy: a planted resolver that sees every name cordon looks up.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
}

// HostProbe is a probe judged from outside: it runs an attack in a sandbox
// of its own and looks at the outcome and at the host afterwards.
type HostProbe struct {
	ID       string
	Category string
	Attempt  string
	Expect   string
	Run      func(r Runner, p *profile.Profile) (Status, string)
}

// SelectHost returns the host-side probes of category (all when empty).
func SelectHost(all []HostProbe, category string) []HostProbe {
	var out []HostProbe
	for _, p := range all {
		if category == "" || p.Category == category {
			out = append(out, p)
		}
	}
	return out
}

// RunHost runs the host-side probes.
func RunHost(probes []HostProbe, r Runner, p *profile.Profile) []Result {
	var out []Result
	for _, hp := range probes {
		status, evidence := hp.Run(r, p)
		out = append(out, Result{ID: hp.ID, Category: hp.Category, Attempt: hp.Attempt, Expect: hp.Expect, Status: status, Evidence: evidence})
	}
	return out
}
