package profile

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/cel"
	"github.com/cordon-sandbox/cordon/internal/pathglob"
)

// Tool is the profile's policy for one tool the agent may call: what kind
// of consequence it has, which labels what it returns carries into the
// session, which labels may flow into it, and how often it may be called.
// A tool the profile does not list is refused.
type Tool struct {
	// Class is the consequence of a call: read, write, external,
	// irreversible, financial or physical.
	Class string `yaml:"class,omitempty" json:"class,omitempty"`
	// Deny refuses every call, with the profile saying so.
	Deny bool `yaml:"deny,omitempty" json:"deny,omitempty"`
	// Returns are the labels of everything the tool returns.
	Returns []string `yaml:"returns,omitempty" json:"returns,omitempty"`
	// Labels label what a call returns by the value of an argument.
	Labels []LabelRule `yaml:"labels,omitempty" json:"labels,omitempty"`
	// Accepts are the labels that may flow into the tool: a call is refused
	// while the session carries a label not listed here. Only sinks are
	// checked: tools of an outward class (external, irreversible,
	// financial, physical) and any tool that lists what it accepts.
	Accepts []string `yaml:"accepts,omitempty" json:"accepts,omitempty"`
	// Calls caps the calls of the tool in one session; 0 is no cap.
	Calls int `yaml:"calls,omitempty" json:"calls,omitempty"`
	// Constraints are CEL expressions over the call's arguments (args);
	// a call is refused unless every one of them is true.
	Constraints []string `yaml:"constraints,omitempty" json:"constraints,omitempty"`
	// Deletes marks a tool whose calls delete: trajectory rules count them
	// (session.deletes).
	Deletes bool `yaml:"deletes,omitempty" json:"deletes,omitempty"`
	// Pin is the SHA-256 of an upstream tool's whole definition as it was
	// approved ("sha256:HEX", see gateway.Canonical); a tool whose
	// definition no longer matches is disabled.
	Pin string `yaml:"pin,omitempty" json:"pin,omitempty"`
	// Paths name the arguments of an upstream tool that are file paths:
	// the gateway resolves them (symlinks included) in the server's view
	// before constraints and labels read them, and sends the server the
	// resolved path. Built-in tools know theirs.
	Paths []string `yaml:"paths,omitempty" json:"paths,omitempty"`

	// checks are the compiled Constraints.
	checks []*cel.Program
}

// Checks are the tool's compiled constraints, in the order of Constraints.
func (t Tool) Checks() []*cel.Program { return t.checks }

// Server is an MCP tool server the gateway fronts: a command that speaks
// MCP on its standard input and output, run in a sandbox of its own
// profile, or a remote server reached over HTTP through the egress rules.
type Server struct {
	Command []string `yaml:"command,omitempty" json:"command,omitempty"`
	// Profile is the file of the server's own sandbox profile, relative to
	// the file of this one.
	Profile string `yaml:"profile,omitempty" json:"profile,omitempty"`
	URL     string `yaml:"url,omitempty" json:"url,omitempty"`
}

// UpstreamSep separates a server's name from its tool's in the name the
// agent sees: fs__read_file is the tool read_file of the server fs.
const UpstreamSep = "__"

// Upstream splits the name of an upstream tool into its server and the
// tool's own name; ok is false for other tools.
func (p *Profile) Upstream(name string) (server, tool string, ok bool) {
	server, tool, ok = strings.Cut(name, UpstreamSep)
	if !ok || tool == "" {
		return "", "", false
	}
	_, ok = p.Servers[server]
	return server, tool, ok
}

// LabelRule gives labels to what a call returns when the argument Arg
// matches: its value starts with Prefix and ends with Suffix (either may
// be empty), and matches the glob pattern Glob (pathglob), when given. A
// path argument is matched as the file it resolves to: Glob and a relative
// Prefix against its path relative to the workspace, an absolute Prefix
// and Suffix against its absolute path.
type LabelRule struct {
	Arg    string   `yaml:"arg" json:"arg"`
	Glob   string   `yaml:"glob,omitempty" json:"glob,omitempty"`
	Prefix string   `yaml:"prefix,omitempty" json:"prefix,omitempty"`
	Suffix string   `yaml:"suffix,omitempty" json:"suffix,omitempty"`
	Labels []string `yaml:"labels" json:"labels"`
}

// BuiltinPaths are the path arguments of the built-in tools.
var BuiltinPaths = map[string][]string{"read_file": {"path"}, "write_file": {"path"}, "list_files": {"path"}}

// PathArgs are the arguments of the tool name that are file paths.
func (p *Profile) PathArgs(name string) []string {
	if ps, ok := BuiltinPaths[name]; ok {
		return ps
	}
	return p.Tools[name].Paths
}

// Session bounds one agent task: calls allowed, steps taken (every call
// the agent makes, refused ones included), wall time, and how many times in
// a row the same call may fail before it is refused as a loop. 0 or empty
// is no bound. The sizes of a call's arguments and of a result are always
// bounded (see ArgumentCap and ResultCap).
type Session struct {
	Calls   int    `yaml:"calls,omitempty" json:"calls,omitempty"`
	Steps   int    `yaml:"steps,omitempty" json:"steps,omitempty"`
	Wall    string `yaml:"wall,omitempty" json:"wall,omitempty"`
	Repeats int    `yaml:"repeats,omitempty" json:"repeats,omitempty"`
	// MaxArgumentBytes and MaxResultBytes are sizes ("1MiB").
	MaxArgumentBytes string `yaml:"max_argument_bytes,omitempty" json:"max_argument_bytes,omitempty"`
	MaxResultBytes   string `yaml:"max_result_bytes,omitempty" json:"max_result_bytes,omitempty"`
}

// WallTime is the session's wall-time bound, 0 for none. The profile is
// validated: the value parses.
func (s *Session) WallTime() time.Duration {
	if s == nil || s.Wall == "" {
		return 0
	}
	n, _ := parseDuration(s.Wall)
	return time.Duration(n)
}

// Consequence classes of a tool.
var ToolClasses = []string{"read", "write", "external", "irreversible", "financial", "physical"}

// Outward reports whether a class's calls reach beyond the agent's own
// workspace, so that what flows into them leaves.
func Outward(class string) bool {
	switch class {
	case "external", "irreversible", "financial", "physical":
		return true
	}
	return false
}

// BuiltinLabels are the labels every profile knows; Labels adds others.
var BuiltinLabels = []string{"secret", "untrusted", "pii"}

// ToolNames lists the tools of the profile, sorted.
func (p *Profile) ToolNames() []string {
	return slices.Sorted(maps.Keys(p.Tools))
}

// toolName accepts tool and label names: letters, digits, '_' and '-'.
var toolName = nameRule{first: alnum + "_", rest: alnum + "_-", max: 128}

func (p *Profile) validateTools(bad func(field, format string, args ...any)) {
	known := map[string]bool{}
	for _, l := range BuiltinLabels {
		known[l] = true
	}
	for i, l := range p.Labels {
		switch {
		case !toolName.MatchString(l):
			bad(fmt.Sprintf("labels[%d]", i), "%q is not a valid label (letters, digits, '_', '-')", l)
		case known[l]:
			bad(fmt.Sprintf("labels[%d]", i), "%q is already a label", l)
		}
		known[l] = true
	}
	labels := func(field string, ls []string) {
		for i, l := range ls {
			if !known[l] {
				bad(fmt.Sprintf("%s[%d]", field, i), "unknown label %q (known: %s; a profile adds its own under labels)", l, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
			}
		}
	}
	for _, name := range p.ToolNames() {
		t := p.Tools[name]
		field := "tools." + name
		if !toolName.MatchString(name) {
			bad(field, "%q is not a valid tool name", name)
			continue
		}
		_, _, upstream := p.Upstream(name)
		if s, _, ok := strings.Cut(name, UpstreamSep); ok && !upstream {
			bad(field, "no server %q under servers (a tool named SERVER%sTOOL is a tool of that server)", s, UpstreamSep)
		}
		if upstream && t.Class == "" {
			// An upstream tool whose consequence is not declared is taken
			// at its worst.
			t.Class = "irreversible"
		}
		if t.Pin != "" {
			if !upstream {
				bad(field+".pin", "only a tool of a server under servers has a pin")
			} else if h, ok := strings.CutPrefix(t.Pin, "sha256:"); !ok || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
				bad(field+".pin", "%q is not sha256: and 64 lowercase hex digits (cordon mcp tools prints the pins)", t.Pin)
			}
		}
		t.checks = nil
		for i, c := range t.Constraints {
			prog, err := cel.Compile(c)
			if err != nil {
				bad(fmt.Sprintf("%s.constraints[%d]", field, i), "%v", err)
				continue
			}
			t.checks = append(t.checks, prog)
		}
		p.Tools[name] = t
		if t.Class == "" && !t.Deny {
			bad(field+".class", "missing: say what a call does (%s)", strings.Join(ToolClasses, ", "))
		} else if t.Class != "" && !slices.Contains(ToolClasses, t.Class) {
			bad(field+".class", "%q is not a class (%s)", t.Class, strings.Join(ToolClasses, ", "))
		}
		labels(field+".returns", t.Returns)
		labels(field+".accepts", t.Accepts)
		for i, r := range t.Labels {
			rf := fmt.Sprintf("%s.labels[%d]", field, i)
			if r.Arg == "" {
				bad(rf+".arg", "missing: the argument whose value is matched")
			}
			if r.Prefix == "" && r.Suffix == "" && r.Glob == "" {
				bad(rf, "give a glob, a prefix or a suffix")
			}
			if r.Glob != "" {
				if err := pathglob.Check(r.Glob); err != nil {
					bad(rf+".glob", "%v", err)
				}
			}
			if len(r.Labels) == 0 {
				bad(rf+".labels", "missing")
			}
			labels(rf+".labels", r.Labels)
		}
		if t.Calls < 0 {
			bad(field+".calls", "%d is negative", t.Calls)
		}
		if len(t.Paths) > 0 && !upstream {
			bad(field+".paths", "only a tool of a server under servers names its path arguments (the built-in tools know theirs)")
		}
		for i, a := range t.Paths {
			if a == "" || slices.Contains(t.Paths[:i], a) {
				bad(fmt.Sprintf("%s.paths[%d]", field, i), "%q is empty or named twice", a)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Servers)) {
		srv := p.Servers[name]
		field := "servers." + name
		switch {
		case !toolName.MatchString(name) || strings.Contains(name, UpstreamSep):
			bad(field, "%q is not a valid server name (letters, digits, '_', '-', without %q)", name, UpstreamSep)
		case len(srv.Command) > 0 && srv.URL != "":
			bad(field, "give a command or a url, not both")
		case len(srv.Command) > 0:
			if srv.Profile == "" {
				bad(field+".profile", "missing: a server runs in a sandbox of its own profile; name its file")
			}
		case srv.URL != "":
			u, err := url.Parse(srv.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(field+".url", "%q is not an http or https URL", srv.URL)
			}
			if srv.Profile != "" {
				bad(field+".profile", "a remote server runs no sandbox here; its destination must be allowed under network")
			}
		default:
			bad(field, "give the command that starts the server, or its url")
		}
	}
	if s := p.Session; s != nil {
		for _, b := range []struct {
			name string
			n    int
		}{{"calls", s.Calls}, {"steps", s.Steps}, {"repeats", s.Repeats}} {
			if b.n < 0 {
				bad("session."+b.name, "%d is negative", b.n)
			}
		}
		if s.Wall != "" {
			if n, err := parseDuration(s.Wall); err != nil || n <= 0 {
				bad("session.wall", "%q is not a duration (30s, 10m, 2h)", s.Wall)
			}
		}
	}
}

func cloneTools(ts map[string]Tool) map[string]Tool {
	if ts == nil {
		return nil
	}
	out := make(map[string]Tool, len(ts))
	for name, t := range ts {
		t.Returns = slices.Clone(t.Returns)
		t.Accepts = slices.Clone(t.Accepts)
		t.Labels = slices.Clone(t.Labels)
		t.Constraints = slices.Clone(t.Constraints)
		t.Paths = slices.Clone(t.Paths)
		for i := range t.Labels {
			t.Labels[i].Labels = slices.Clone(t.Labels[i].Labels)
		}
		out[name] = t
	}
	return out
}
