package profile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/pathglob"
)

// Review says which changes of a reviewed workspace (workspace.mode:
// review) need a person's approval before `cordon apply` lands them, and
// who may apply them through cordon serve.
type Review struct {
	// RequireApproval names classes of changes (ReviewClasses) and globs of
	// paths relative to the workspace ("deploy/**"). Without the section,
	// DefaultReviewApproval applies; an empty list requires none.
	RequireApproval []string `yaml:"require_approval" json:"require_approval"`
	// AgentApplies lets the agent that owns a sandbox of cordon serve apply
	// its own changes; otherwise only an admin or an approver may.
	AgentApplies bool `yaml:"agent_applies,omitempty" json:"agent_applies,omitempty"`
}

// ReviewClasses are the classes of changes require_approval may name: the
// flags cordon gives a change when it captures it.
var ReviewClasses = map[string]string{
	"protected":   "files the host's tools run or obey: git's hooks and configuration, editor and agent settings, shell start-up files, CI workflows",
	"executables": "files made executable",
	"setuid":      "files with the setuid or setgid bit (stripped when applied)",
	"links":       "symbolic links that point outside the workspace",
	"large":       "files over 1 MiB (too large for the diff)",
	"binary":      "files that are not text",
	"deletions":   "files and directories deleted",
	"all":         "every change",
}

// DefaultReviewApproval is what needs approval without a review section;
// protected changes need it with any.
var DefaultReviewApproval = []string{"protected"}

// flagOfClass maps a class to the flag a change carries.
var flagOfClass = map[string]string{
	"protected": "protected", "executables": "executable", "setuid": "setuid",
	"links": "outside_link", "large": "large", "binary": "binary",
}

// ReviewPolicy is the profile's review section, or the defaults.
func (p *Profile) ReviewPolicy() Review {
	if p.Review != nil {
		return *p.Review
	}
	return Review{RequireApproval: DefaultReviewApproval}
}

// NeedsApproval returns the entry of RequireApproval that holds a change
// of kind ("added", "modified", "deleted") at rel with flags, or "" when
// none does. A protected change (a file the host's tools run or obey) is
// held whatever the list says: the list adds to it, it cannot take it
// away.
func (r Review) NeedsApproval(rel, kind string, flags []string) string {
	if rule := r.needsApproval(rel, kind, flags); rule != "" {
		return rule
	}
	if slices.Contains(flags, flagOfClass["protected"]) {
		return "protected"
	}
	return ""
}

func (r Review) needsApproval(rel, kind string, flags []string) string {
	for _, want := range r.RequireApproval {
		switch {
		case want == "all":
			return want
		case want == "deletions":
			if kind == "deleted" {
				return want
			}
		case ReviewClasses[want] != "":
			if slices.Contains(flags, flagOfClass[want]) {
				return want
			}
		default:
			if pathglob.Match(strings.TrimPrefix(want, "./"), rel) {
				return want
			}
		}
	}
	return ""
}

func (p *Profile) validateReview(bad func(field, format string, args ...any)) {
	switch p.Workspace.Mode {
	case "", ModeDirect:
	case ModeReview, ModeGuarded:
		if p.Workspace.Path == "" {
			bad("workspace.mode", "%s needs a workspace: set workspace.path", p.Workspace.Mode)
		} else if !p.Workspace.Writable {
			bad("workspace.mode", "%s is for a writable workspace: this one is read-only (workspace.writable: false), so there is nothing to judge", p.Workspace.Mode)
		}
	default:
		bad("workspace.mode", "%q: want %s, %s or %s", p.Workspace.Mode, ModeDirect, ModeGuarded, ModeReview)
	}
	if p.Review == nil {
		return
	}
	for i, want := range p.Review.RequireApproval {
		field := fmt.Sprintf("review.require_approval[%d]", i)
		if ReviewClasses[want] != "" {
			continue
		}
		if want == "" || strings.HasPrefix(want, "/") || strings.Contains(want, "..") {
			bad(field, "%q: want a class (%s) or a glob relative to the workspace such as deploy/**", want, strings.Join(reviewClassNames(), ", "))
			continue
		}
		if err := pathglob.Check(want); err != nil {
			bad(field, "%q: %v", want, err)
		}
	}
}

func reviewClassNames() []string {
	var names []string
	for k := range ReviewClasses {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}
