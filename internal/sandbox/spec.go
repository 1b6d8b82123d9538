// Package sandbox is the host side of cordon: it turns a profile into a Spec,
// starts the sandbox init in new namespaces and in a cgroup of its own,
// passes it the Spec through a pipe, carries the command's output (counted
// and capped) and its network connections (through the egress proxy),
// enforces the wall clock and the cgroup's limits, forwards signals, and
// gathers the facts of how the run ended for the outcome.
package sandbox

import (
	"net"
	"slices"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/journal"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/protect"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// Spec is what the host side keeps of a sandbox's Spec: what init is sent,
// and the protected paths' plans.
type Spec struct {
	wire.Spec
	// workspace is where the workspace appears inside, when the command
	// starts elsewhere (a directory beneath it); see atWorkspace.
	workspace string
	// plans are the protections of the writable binds, whose placeholders
	// release removes once the sandbox has ended.
	plans []*protect.Plan
	// restored names the directories whose permissions the sandbox
	// changed, set back when the plans were removed.
	restored []string
	// journal, when set, holds under jid what the sandbox makes on the
	// host, before it is made (see package journal).
	journal *journal.Journal
	jid     string
	// caches are the targets of the agent's caches' binds; cachesLeft
	// says why some were left out (see openTrees).
	caches, cachesLeft []string
}

// dropCaches leaves the agent's caches out of the sandbox: their binds,
// and the variables that name them.
func (s *Spec) dropCaches() {
	for i := range s.Mounts {
		if slices.Contains(s.caches, s.Mounts[i].Target) {
			s.Mounts[i].Missing = true
		}
	}
	env := s.Env[:0]
	for _, kv := range s.Env {
		_, v, _ := strings.Cut(kv, "=")
		if !slices.Contains(s.caches, v) {
			env = append(env, kv)
		}
	}
	s.Env = env
}

// atWorkspace reports whether target is where the workspace appears
// inside: the working directory, unless the command starts beneath it.
func (s *Spec) atWorkspace(target string) bool {
	if s.workspace != "" {
		return target == s.workspace
	}
	return target == s.Workdir
}

// release removes the placeholders the protected paths needed; it is
// called once the sandbox has ended (or was never started).
func (s *Spec) release() {
	for _, p := range s.plans {
		p.Remove()
		s.restored = append(s.restored, p.Restored...)
	}
	s.plans = nil
}

// allowsLoopback reports whether a destination of the allowlist is on the
// host's loopback (localhost, 127.0.0.0/8, ::1, or a range holding them).
func allowsLoopback(dests []profile.Destination) bool {
	for _, d := range dests {
		host := d.Dest
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.Trim(host, "[]")
		if strings.EqualFold(host, "localhost") {
			return true
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			return true
		}
		if _, n, err := net.ParseCIDR(host); err == nil && (n.Contains(net.IPv4(127, 0, 0, 1)) || n.Contains(net.IPv6loopback)) {
			return true
		}
	}
	return false
}
