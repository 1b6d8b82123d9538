package changes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// Review is what applying a change set needs to know of the profile it
// came from, kept beside the set (review.json) when it is captured: the
// set may be applied long after, by cordon apply or cordon serve, whatever
// the profile file says by then.
type Review struct {
	Agent       string   `json:"agent"`
	Profile     string   `json:"profile"`
	ProfileHash string   `json:"profile_sha256"`
	Require     []string `json:"require_approval"`
	Approvers   []string `json:"approvers,omitempty"`
}

// ReviewOf is the review record of a set captured from a run of p (loaded
// from file, whose hash is hash).
func ReviewOf(p *profile.Profile, file, hash string) Review {
	rv := Review{Agent: p.Agent, Profile: file, ProfileHash: hash,
		Require: p.ReviewPolicy().RequireApproval, Approvers: p.ApprovalPolicy().Approvers}
	if rv.Require == nil {
		rv.Require = []string{}
	}
	return rv
}

const reviewFile = "review.json"

// WriteReview keeps rv beside the change set run of dir.
func WriteReview(dir, run string, rv Review) error {
	b, _ := json.MarshalIndent(rv, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, run, reviewFile), b, 0o600); err != nil {
		return fmt.Errorf("change set %s: keeping its review policy: %w", run, err)
	}
	return nil
}

// LoadReview reads the review record kept beside the change set run.
func LoadReview(dir, run string) (Review, error) {
	var rv Review
	b, err := os.ReadFile(filepath.Join(dir, run, reviewFile))
	if err != nil {
		return rv, fmt.Errorf("change set %s: its review policy: %w", run, err)
	}
	if err := json.Unmarshal(b, &rv); err != nil {
		return rv, fmt.Errorf("change set %s: its review policy: %w", run, err)
	}
	return rv, nil
}

// Held is a change that needs a person's approval, and the rule of the
// review policy that holds it.
type Held struct {
	Path  string   `json:"path"`
	Kind  string   `json:"kind"`
	Rule  string   `json:"rule"`
	Flags []string `json:"flags,omitempty"`
}

// MaxHeldListed bounds the held changes an answer or an approval request
// lists one by one (the total is given beside).
const MaxHeldListed = 200

// Held lists the changes among cs that rv's policy holds, at most
// MaxHeldListed of them, and how many there are in all.
func (rv Review) Held(cs []Change) ([]Held, int) {
	pol := profile.Review{RequireApproval: rv.Require}
	out, n := []Held{}, 0
	for _, c := range cs {
		if rule := pol.NeedsApproval(c.Path, c.Kind, c.Flags); rule != "" {
			n++
			if len(out) < MaxHeldListed {
				out = append(out, Held{Path: c.Path, Kind: c.Kind, Rule: rule, Flags: c.Flags})
			}
		}
	}
	return out, n
}

// ApplyTool is how an approval request for a change set names what it
// holds.
const ApplyTool = "cordon apply"

// ApprovalTimeout is how long a change set's approval request waits: a
// review may take a working day.
const ApprovalTimeout = 7 * 24 * time.Hour

// ApprovalArgs are the arguments of the approval request for the held
// changes of set (listed, n in all): the digest an approval covers, and
// what a person reviews.
func ApprovalArgs(set *Set, listed []Held, n int) json.RawMessage {
	args, _ := json.Marshal(map[string]any{"set": set.Run, "digest": set.Digest, "workspace": set.Workspace,
		"changes": len(set.Changes), "held": listed, "held_total": n})
	return args
}

// ApprovalDigest is the digest an approval request for a change set
// covers, "" when args are not such a request's.
func ApprovalDigest(args json.RawMessage) string {
	var a struct {
		Digest string `json:"digest"`
	}
	if json.Unmarshal(args, &a) != nil {
		return ""
	}
	return a.Digest
}

// HeldRules names the rules that hold the listed changes, each once, for
// an approval request.
func HeldRules(listed []Held) string {
	var rules []string
	seen := map[string]bool{}
	for _, h := range listed {
		if !seen[h.Rule] {
			seen[h.Rule] = true
			rules = append(rules, h.Rule)
		}
	}
	return "review.require_approval: " + strings.Join(rules, ", ")
}

// MaxPathsRecorded bounds the paths an audit record lists one by one.
const MaxPathsRecorded = 1000

// BoundedPaths is a list of paths for the audit log: whole, or its first
// MaxPathsRecorded with the total and a digest of the whole list.
func BoundedPaths(ps []string) any {
	if len(ps) <= MaxPathsRecorded {
		return ps
	}
	sum := sha256.Sum256([]byte(strings.Join(ps, "\x00")))
	return map[string]any{"first": ps[:MaxPathsRecorded], "total": len(ps), "sha256": hex.EncodeToString(sum[:])}
}

// ApplyRecord is the audit record of an apply: the set's digest and what
// landed, every list bounded; the caller adds who applied.
func ApplyRecord(set *Set, rep *Report) map[string]any {
	conflicts := rep.Conflicts
	if len(conflicts) > MaxPathsRecorded {
		conflicts = conflicts[:MaxPathsRecorded]
	}
	return map[string]any{"set": set.Run, "digest": set.Digest, "workspace": set.Workspace,
		"applied": BoundedPaths(rep.Applied), "already": len(rep.Already), "conflicts": conflicts,
		"conflicts_total": len(rep.Conflicts), "refused": BoundedPaths(rep.Refused)}
}
