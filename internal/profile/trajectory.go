package profile

import (
	"fmt"
	"time"

	"github.com/cordon-sandbox/cordon/internal/cel"
)

// Trajectory holds the checks over a whole agent session, made at
// checkpoints: steps that are each harmless can add up to what nobody
// meant (many small uploads, file access widening a little at a time, an
// agent probing the boundary).
type Trajectory struct {
	// EverySteps is how many steps apart checkpoints are; 0 is every step.
	EverySteps int `yaml:"every_steps,omitempty" json:"every_steps,omitempty"`
	// Every adds a checkpoint each time this long passes since the last
	// one, with or without steps ("30s"); empty: none.
	Every string `yaml:"every,omitempty" json:"every,omitempty"`
	// Rules are CEL expressions over the session (see SessionVars).
	Rules []TrajectoryRule `yaml:"rules,omitempty" json:"rules,omitempty"`
	// Probing is the built-in rule for a burst of refusals.
	Probing *Probing `yaml:"probing,omitempty" json:"probing,omitempty"`
}

// TrajectoryRule is one check: when When holds at a checkpoint, Action
// happens: warn (reported), approve (every later call of the session is
// held for a person) or stop (every later call is refused).
type TrajectoryRule struct {
	Name   string `yaml:"name" json:"name"`
	When   string `yaml:"when" json:"when"`
	Action string `yaml:"action" json:"action"`

	prog *cel.Program
}

// Program is the rule's compiled expression.
func (r TrajectoryRule) Program() *cel.Program { return r.prog }

// Probing treats Denials refusals among the last Window decisions as an
// agent probing its boundary.
type Probing struct {
	Window  int    `yaml:"window,omitempty" json:"window,omitempty"`
	Denials int    `yaml:"denials,omitempty" json:"denials,omitempty"`
	Action  string `yaml:"action,omitempty" json:"action,omitempty"`
}

// CheckpointEvery is the time between the checkpoints of trajectory.every;
// 0 for none.
func (p *Profile) CheckpointEvery() time.Duration {
	if p.Trajectory == nil || p.Trajectory.Every == "" {
		return 0
	}
	d, _ := time.ParseDuration(p.Trajectory.Every)
	return d
}

// Default probing rule: 10 refusals among 20 decisions stop the session.
var DefaultProbing = Probing{Window: 20, Denials: 10, Action: "stop"}

// ProbingRule is the profile's probing rule, or the default.
func (p *Profile) ProbingRule() Probing {
	r := DefaultProbing
	if p.Trajectory != nil && p.Trajectory.Probing != nil {
		q := *p.Trajectory.Probing
		if q.Window > 0 {
			r.Window = q.Window
		}
		if q.Denials > 0 {
			r.Denials = q.Denials
		}
		if q.Action != "" {
			r.Action = q.Action
		}
	}
	return r
}

// SessionEnv is what a trajectory rule may name: the variable session (a
// map of the session's counters: steps, calls, tools (calls by tool),
// bytes_out, hosts, files_read, files_written, labels, denials,
// approvals) and the method session.denials_last(n).
var SessionEnv = &cel.Env{
	Vars: []string{"session"},
	Methods: map[string]cel.Method{
		"denials_last": {Arity: 1, Fn: func(recv any, args []any) (any, error) {
			m, ok := recv.(map[string]any)
			n, ok2 := args[0].(int64)
			if !ok || !ok2 {
				return nil, fmt.Errorf("denials_last(n) is a method of session, with an int")
			}
			refused, _ := m["refused"].([]any)
			if int(n) < len(refused) {
				refused = refused[len(refused)-int(n):]
			}
			count := int64(0)
			for _, r := range refused {
				if r == true {
					count++
				}
			}
			return count, nil
		}},
	},
}

func (p *Profile) validateTrajectory(bad func(field, format string, args ...any)) {
	t := p.Trajectory
	if t == nil {
		return
	}
	if t.EverySteps < 0 {
		bad("trajectory.every_steps", "%d is negative", t.EverySteps)
	}
	if t.Every != "" {
		if d, err := time.ParseDuration(t.Every); err != nil || d < time.Second {
			bad("trajectory.every", "want a duration of at least 1s, such as 30s, found %q", t.Every)
		}
	}
	seen := map[string]bool{}
	for i := range t.Rules {
		r := &t.Rules[i]
		field := fmt.Sprintf("trajectory.rules[%d]", i)
		switch {
		case !toolName.MatchString(r.Name):
			bad(field+".name", "%q is not a valid name (letters, digits, '_', '-')", r.Name)
		case seen[r.Name] || r.Name == "probing":
			bad(field+".name", "%q is taken", r.Name)
		}
		seen[r.Name] = true
		if !validAction(r.Action) {
			bad(field+".action", "%q is not an action (warn, approve, stop)", r.Action)
		}
		prog, err := SessionEnv.Compile(r.When)
		if err != nil {
			bad(field+".when", "%v", err)
		}
		r.prog = prog
	}
	if q := t.Probing; q != nil {
		if q.Window < 0 || q.Denials < 0 {
			bad("trajectory.probing", "window and denials are counts")
		}
		if q.Action != "" && !validAction(q.Action) {
			bad("trajectory.probing.action", "%q is not an action (warn, approve, stop)", q.Action)
		}
	}
}

func validAction(a string) bool { return a == "warn" || a == "approve" || a == "stop" }
