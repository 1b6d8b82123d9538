package profile

import "time"

// Drift configures the checks of a running sandbox against how it was
// built (namespaces, mount table, cgroup limits, seccomp and no_new_privs
// of its processes, the profile file).
type Drift struct {
	// Every is the interval between checks ("10s", "1m"), or "off".
	Every string `yaml:"every,omitempty" json:"every,omitempty"`
	// Action is what a change does: stop (the default) ends the run with
	// the drift outcome; warn reports it and goes on.
	Action string `yaml:"action,omitempty" json:"action,omitempty"`
}

// DefaultDriftEvery is the interval without drift.every.
const DefaultDriftEvery = 10 * time.Second

// DriftEvery is the interval between drift checks; 0 for none.
func (p *Profile) DriftEvery() time.Duration {
	if p.Drift == nil || p.Drift.Every == "" {
		return DefaultDriftEvery
	}
	if p.Drift.Every == "off" {
		return 0
	}
	n, _ := parseDuration(p.Drift.Every)
	return time.Duration(n)
}

// DriftStops reports whether a change ends the run.
func (p *Profile) DriftStops() bool {
	return p.Drift == nil || p.Drift.Action != "warn"
}

func (p *Profile) validateDrift(bad func(field, format string, args ...any)) {
	d := p.Drift
	if d == nil {
		return
	}
	if d.Every != "" && d.Every != "off" {
		if n, err := parseDuration(d.Every); err != nil || n < int64(100*time.Millisecond) {
			bad("drift.every", "%q is not a duration of at least 100ms (10s, 1m), or off", d.Every)
		}
	}
	switch d.Action {
	case "", "stop", "warn":
	default:
		bad("drift.action", "%q is not an action (stop, warn)", d.Action)
	}
}
