package profile

import (
	"fmt"
	"path"
	"strings"
)

// Defaults for fields a profile leaves out.
const (
	DefaultHostname = "cordon"
	DefaultUserName = "agent"
	DefaultUID      = 1000
	// maxID keeps the sandbox user clear of root and of the overflow ids.
	maxID = 65533
)

// Name checks. Hand-written rather than regular expressions: the profile
// package is initialized in every sandbox's init, where start-up time counts.
var (
	agentRe    = nameRule{first: alnum, rest: alnum + "._-", max: 128}
	hostnameRe = nameRule{first: alnum, rest: alnum + "-", last: alnum, max: 63}
	userRe     = nameRule{first: lower + "_", rest: lower + digits + "_-", max: 32}
	envNameRe  = nameRule{first: letters + "_", rest: letters + digits + "_", max: 1 << 16}
)

const (
	lower   = "abcdefghijklmnopqrstuvwxyz"
	letters = lower + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	digits  = "0123456789"
	alnum   = letters + digits
)

// nameRule accepts names of 1..max bytes whose first byte is in first, the
// others in rest, and the last (when last is set and the name is longer than
// one byte) in last.
type nameRule struct {
	first, rest, last string
	max               int
}

func (r nameRule) MatchString(s string) bool {
	if len(s) == 0 || len(s) > r.max || strings.IndexByte(r.first, s[0]) < 0 {
		return false
	}
	for i := 1; i < len(s); i++ {
		if strings.IndexByte(r.rest, s[i]) < 0 {
			return false
		}
	}
	return r.last == "" || len(s) == 1 || strings.IndexByte(r.last, s[len(s)-1]) >= 0
}

// reserved are paths inside the sandbox that cordon builds itself; no bind may
// replace them or be placed beneath the special file systems.
var reserved = []string{"/proc", "/dev"}

// reservedFiles are the synthetic files cordon writes into the sandbox.
var reservedFiles = []string{"/etc", "/etc/passwd", "/etc/group", "/etc/hostname", "/etc/hosts"}

// validate checks every field, fills defaults, and returns all problems found.
func (p *Profile) validate(src *source) Errors {
	var errs Errors
	bad := func(field, format string, args ...any) {
		errs = append(errs, src.errorAt(field, format, args...))
	}

	if p.Version != Version {
		if p.Version == 0 {
			bad("version", "missing; this build reads version: %d", Version)
		} else {
			bad("version", "unsupported version %d; this build reads version: %d", p.Version, Version)
		}
	}
	if !agentRe.MatchString(p.Agent) {
		if p.Agent == "" {
			bad("agent", "missing: every profile names the one agent it serves")
		} else {
			bad("agent", "%q is not a valid agent name (letters, digits, '.', '_', '-'; at most 128)", p.Agent)
		}
	}
	if p.Hostname == "" {
		p.Hostname = DefaultHostname
	} else if !hostnameRe.MatchString(p.Hostname) {
		bad("hostname", "%q is not a valid host name", p.Hostname)
	}

	if p.User.Name == "" {
		p.User.Name = DefaultUserName
	} else if !userRe.MatchString(p.User.Name) {
		bad("user.name", "%q is not a valid user name", p.User.Name)
	}
	if p.User.UID == 0 && !src.has("user.uid") {
		p.User.UID = DefaultUID
	}
	if p.User.GID == 0 && !src.has("user.gid") {
		p.User.GID = p.User.UID
		if p.User.GID < 1 || p.User.GID > maxID {
			p.User.GID = DefaultUID // the uid is reported; don't report it twice
		}
	}
	if p.User.UID < 1 || p.User.UID > maxID {
		bad("user.uid", "%d is out of range: the sandbox user is never root; use 1..%d", p.User.UID, maxID)
	}
	if p.User.GID < 1 || p.User.GID > maxID {
		bad("user.gid", "%d is out of range: use 1..%d", p.User.GID, maxID)
	}

	targets := map[string]string{}
	checkTarget := func(field, target string) {
		if msg := p.targetProblem(target); msg != "" {
			bad(field, "%s", msg)
			return
		}
		if prev, dup := targets[target]; dup {
			bad(field, "%s is already the target of %s", target, prev)
			return
		}
		targets[target] = field
	}

	if p.Workspace.Path != "" {
		if strings.ContainsRune(p.Workspace.Path, 0) {
			bad("workspace.path", "contains a NUL byte")
		}
		if p.Workspace.Target != "" {
			checkTarget("workspace.target", p.Workspace.Target)
		}
	} else if p.Workspace.Target != "" {
		bad("workspace.target", "set without workspace.path")
	}
	for i, u := range p.Workspace.Unprotect {
		field := fmt.Sprintf("workspace.unprotect[%d]", i)
		if c := path.Clean(u); u == "" || c != u || path.IsAbs(u) || c == "." || c == ".." || strings.HasPrefix(c, "../") {
			bad(field, "%q: want a clean path relative to a writable bind's root, such as .git/config or .vscode", u)
		}
	}

	for i := range p.Mounts {
		m := &p.Mounts[i]
		field := fmt.Sprintf("mounts[%d]", i)
		if msg := hostPathProblem(m.Path); msg != "" {
			bad(field+".path", "%s", msg)
			continue
		}
		if m.Target != "" {
			checkTarget(field+".target", m.Target)
		} else {
			checkTarget(field+".path", m.Path)
		}
	}

	for name, v := range p.Env.Set {
		if !envNameRe.MatchString(name) {
			bad("env.set."+name, "%q is not a valid environment variable name", name)
		} else if strings.ContainsRune(v, 0) {
			bad("env.set."+name, "value contains a NUL byte")
		}
	}
	for i, name := range p.Env.Pass {
		if !envNameRe.MatchString(name) {
			bad(fmt.Sprintf("env.pass[%d]", i), "%q is not a valid environment variable name", name)
		}
	}

	p.validateToolchains(src, bad)
	p.validateCaches(src, bad)
	p.validateResources(bad)
	p.validateNetwork(bad)
	p.validateGovernance(bad)
	p.validateTools(bad)
	p.validateCaps(bad)
	p.validateApproval(bad)
	p.validateDrift(bad)
	p.validateTrajectory(bad)
	p.validateReview(bad)
	return errs
}

// has reports whether field is written in the source.
func (s *source) has(field string) bool {
	_, ok := s.keys[field]
	return ok
}

// hostPathProblem explains why p cannot be a host path to bind, or returns "".
func hostPathProblem(p string) string {
	switch {
	case p == "":
		return "missing"
	case strings.ContainsRune(p, 0):
		return "contains a NUL byte"
	case !path.IsAbs(p):
		return fmt.Sprintf("%q must be an absolute path", p)
	case path.Clean(p) != p:
		return fmt.Sprintf("%q is not clean; write %q", p, path.Clean(p))
	case p == "/":
		return "binding the whole host root is not allowed; name the directories the agent needs"
	}
	return ""
}

// targetProblem is TargetProblem, and also refuses targets that would hide
// the sandbox user's home.
func (p *Profile) targetProblem(t string) string {
	if msg := TargetProblem(t); msg != "" {
		return msg
	}
	if home := p.User.Home(); t == home || strings.HasPrefix(home, t+"/") {
		return fmt.Sprintf("%s would hide the sandbox user's home (%s), which cordon provides; bind below it or elsewhere", t, home)
	}
	return ""
}

// TargetProblem explains why t cannot be a place inside the sandbox, or "".
func TargetProblem(t string) string {
	if msg := hostPathProblem(t); msg != "" {
		return msg
	}
	for _, r := range reserved {
		if t == r || strings.HasPrefix(t, r+"/") {
			return fmt.Sprintf("%s is reserved: cordon builds %s itself", t, r)
		}
	}
	for _, r := range reservedFiles {
		if t == r {
			if t == "/etc" {
				return "/etc is not bound wholesale: it holds host accounts and configuration; bind the files programs need"
			}
			return fmt.Sprintf("%s is reserved: cordon writes a synthetic %s", t, r)
		}
	}
	if t == "/tmp" {
		return "/tmp is reserved: cordon mounts a size-capped tmpfs there"
	}
	return ""
}
