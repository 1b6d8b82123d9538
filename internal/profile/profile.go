// Package profile defines cordon's profiles: one YAML file per agent that says
// exactly what the agent's sandbox may see and do. Loading is strict (unknown
// fields, wrong types and impossible values are errors that name the file,
// line, column and field, all of them reported at once, a misspelt field
// with the name it was likely meant to be) and pure: nothing here touches
// the host beyond reading the profile file itself. docs/profile.schema.json
// describes the same format for editors; tests keep the two in step.
package profile

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
)

// Version is the profile format version this build understands.
const Version = 1

// DefaultName is the name shown for the embedded default profile in errors.
const DefaultName = "<default profile>"

// Profile is a validated profile. Field names follow the YAML keys.
type Profile struct {
	Version   int       `yaml:"version" json:"version"`
	Agent     string    `yaml:"agent" json:"agent"`
	Hostname  string    `yaml:"hostname" json:"hostname"`
	User      User      `yaml:"user" json:"user"`
	Workspace Workspace `yaml:"workspace" json:"workspace"`
	Mounts    []Mount   `yaml:"mounts" json:"mounts"`
	Env       Env       `yaml:"env" json:"env"`
	Resources Resources `yaml:"resources" json:"resources"`
	Network   Network   `yaml:"network,omitempty" json:"network,omitempty"`
	// AllowDegraded names layers the sandbox may go without where the host
	// lacks them, as --allow-degraded does; governance should record who
	// accepted that risk.
	AllowDegraded []string    `yaml:"allow_degraded,omitempty" json:"allow_degraded,omitempty"`
	Governance    *Governance `yaml:"governance,omitempty" json:"governance,omitempty"`
	Providers     []Provider  `yaml:"providers,omitempty" json:"providers,omitempty"`

	// Toolchains are the commands whose host installation the sandbox
	// runs, found as the user's PATH finds them (see Toolchains).
	Toolchains Toolchains `yaml:"toolchains,omitempty" json:"toolchains,omitempty"`
	// Caches are the build and package caches the agent keeps between its
	// runs (see Caches).
	Caches Caches `yaml:"caches,omitempty" json:"caches,omitempty"`

	// Tools are the tools the agent may call through cordon's tool
	// gateway, each with its policy; Labels adds labels of the profile's
	// own to the built-in ones; Session bounds one task.
	Tools   map[string]Tool `yaml:"tools,omitempty" json:"tools,omitempty"`
	Labels  []string        `yaml:"labels,omitempty" json:"labels,omitempty"`
	Session *Session        `yaml:"session,omitempty" json:"session,omitempty"`
	// Servers are the MCP tool servers the gateway fronts; their tools are
	// named SERVER__TOOL in Tools.
	Servers map[string]Server `yaml:"servers,omitempty" json:"servers,omitempty"`
	// Approval says which tool calls a person must approve first.
	Approval *Approval `yaml:"approval,omitempty" json:"approval,omitempty"`
	// Drift says how often a running sandbox is checked against how it was
	// built, and what a change does.
	Drift *Drift `yaml:"drift,omitempty" json:"drift,omitempty"`
	// Trajectory checks the course of a whole agent session.
	Trajectory *Trajectory `yaml:"trajectory,omitempty" json:"trajectory,omitempty"`
	// Review says which changes of a reviewed workspace need a person's
	// approval before they land on the host.
	Review *Review `yaml:"review,omitempty" json:"review,omitempty"`

	// src locates fields in the file the profile was read from.
	src *source
}

// User is the unprivileged account the command runs as inside the sandbox.
type User struct {
	Name string `yaml:"name" json:"name"`
	UID  int    `yaml:"uid" json:"uid"`
	GID  int    `yaml:"gid" json:"gid"`
}

// Home is the user's home directory inside the sandbox.
func (u User) Home() string { return "/home/" + u.Name }

// Workspace is the host directory the agent works in.
type Workspace struct {
	// Path on the host; relative paths are relative to the current directory
	// of the cordon process. Empty means no workspace.
	Path string `yaml:"path" json:"path"`
	// Target is where the workspace appears inside; empty means the same
	// path as on the host.
	Target   string `yaml:"target,omitempty" json:"target,omitempty"`
	Writable bool   `yaml:"writable" json:"writable"`
	// Mode is ModeDirect (the default: a writable workspace is the host
	// directory itself, and what the sandbox writes is on the host at
	// once), ModeReview (the sandbox writes to a copy-on-write layer of
	// its own; the changes wait in cordon's state directory until a person
	// applies or discards them) or ModeGuarded (the same layer, kept on
	// disk; when the run ends, what the host's tools would not obey lands
	// at once and the rest waits as in review).
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
	// Unprotect opens, by name, protected paths that every writable bind
	// otherwise keeps read-only (.git/config, .vscode, ...: see cordon's
	// docs/THREATS.md), relative to the bind's root.
	Unprotect []string `yaml:"unprotect,omitempty" json:"unprotect,omitempty"`
	// AllowSensitive lets a home directory, or a directory holding
	// credentials (.ssh, .aws, ...), be bound writable.
	AllowSensitive bool `yaml:"allow_sensitive,omitempty" json:"allow_sensitive,omitempty"`
}

// Workspace modes.
const (
	ModeDirect  = "direct"
	ModeReview  = "review"
	ModeGuarded = "guarded"
)

// Reviewed reports whether the sandbox's writes to the workspace go to a
// layer of its own and are judged before they reach the host (review and
// guarded modes).
func (w Workspace) Reviewed() bool {
	return w.Path != "" && (w.Mode == ModeReview || w.Mode == ModeGuarded)
}

// Guarded reports whether the workspace is guarded: its layer is on disk,
// and what the review policy does not hold lands when the run ends.
func (w Workspace) Guarded() bool { return w.Path != "" && w.Mode == ModeGuarded }

// Mount binds one host path into the sandbox.
type Mount struct {
	Path     string `yaml:"path" json:"path"`
	Target   string `yaml:"target,omitempty" json:"target,omitempty"`
	Writable bool   `yaml:"writable,omitempty" json:"writable,omitempty"`
	Optional bool   `yaml:"optional,omitempty" json:"optional,omitempty"`
	// Reason says why the agent needs this bind, for review.
	Reason string `yaml:"reason,omitempty" json:"reason,omitempty"`
}

// Dest is where the mount appears inside the sandbox.
func (m Mount) Dest() string {
	if m.Target != "" {
		return m.Target
	}
	return m.Path
}

// Env says which environment variables reach the command. Nothing else of the
// host environment does.
type Env struct {
	// Set gives variables fixed values.
	Set map[string]string `yaml:"set,omitempty" json:"set,omitempty"`
	// Pass copies variables from cordon's own environment when they are set.
	Pass []string `yaml:"pass,omitempty" json:"pass,omitempty"`
}

// DefaultPath is the command's PATH when the profile gives none.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

// Environ builds the command's environment from the profile and a lookup in
// the host environment. HOME defaults to the sandbox user's home and PATH to
// DefaultPath.
func (p *Profile) Environ(lookup func(string) (string, bool)) []string {
	vars := map[string]string{"HOME": p.User.Home(), "PATH": DefaultPath}
	for _, name := range p.Env.Pass {
		if v, ok := lookup(name); ok {
			vars[name] = v
		}
	}
	for k, v := range p.Env.Set {
		vars[k] = v
	}
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Strings(names)
	env := make([]string, 0, len(names))
	for _, k := range names {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// AddMount adds a bind given on the command line (--ro, --rw). A path that the
// profile already binds at the same place is replaced.
func (p *Profile) AddMount(hostPath string, writable bool) error {
	if !path.IsAbs(hostPath) {
		return fmt.Errorf("mount %q: path must be absolute", hostPath)
	}
	m := Mount{Path: path.Clean(hostPath), Writable: writable}
	if msg := hostPathProblem(m.Path); msg != "" {
		return fmt.Errorf("%s", msg)
	}
	if msg := p.targetProblem(m.Dest()); msg != "" {
		return fmt.Errorf("%s", msg)
	}
	for i := range p.Mounts {
		if p.Mounts[i].Dest() == m.Dest() {
			p.Mounts[i] = m
			return nil
		}
	}
	p.Mounts = append(p.Mounts, m)
	return nil
}

// String renders a one-line summary, for messages.
func (m Mount) String() string {
	var b strings.Builder
	b.WriteString(m.Path)
	if m.Target != "" && m.Target != m.Path {
		b.WriteString(" -> " + m.Target)
	}
	if m.Writable {
		b.WriteString(" (rw)")
	} else {
		b.WriteString(" (ro)")
	}
	return b.String()
}

// Clone returns a copy of p that shares nothing with it.
func (p *Profile) Clone() *Profile {
	c := *p
	c.Mounts = slices.Clone(p.Mounts)
	c.Workspace.Unprotect = slices.Clone(p.Workspace.Unprotect)
	c.Env.Set = maps.Clone(p.Env.Set)
	c.Env.Pass = slices.Clone(p.Env.Pass)
	c.Toolchains = slices.Clone(p.Toolchains)
	c.Caches = slices.Clone(p.Caches)
	c.Network.Allow = cloneDests(p.Network.Allow)
	c.Network.Deny = cloneDests(p.Network.Deny)
	c.AllowDegraded = slices.Clone(p.AllowDegraded)
	if p.Governance != nil {
		g := *p.Governance
		g.Ceilings.Paths = slices.Clone(g.Ceilings.Paths)
		g.Ceilings.Writable = slices.Clone(g.Ceilings.Writable)
		g.Ceilings.Destinations = slices.Clone(g.Ceilings.Destinations)
		g.Ceilings.Limits = maps.Clone(g.Ceilings.Limits)
		g.RiskAcceptances = slices.Clone(g.RiskAcceptances)
		c.Governance = &g
	}
	c.Tools = cloneTools(p.Tools)
	c.Labels = slices.Clone(p.Labels)
	if p.Trajectory != nil {
		t := *p.Trajectory
		t.Rules = slices.Clone(t.Rules)
		c.Trajectory = &t
	}
	if p.Drift != nil {
		d := *p.Drift
		c.Drift = &d
	}
	if p.Review != nil {
		r := *p.Review
		r.RequireApproval = slices.Clone(r.RequireApproval)
		c.Review = &r
	}
	if p.Approval != nil {
		a := *p.Approval
		a.Classes = slices.Clone(a.Classes)
		a.Approvers = slices.Clone(a.Approvers)
		a.Tools = maps.Clone(a.Tools)
		c.Approval = &a
	}
	c.Servers = maps.Clone(p.Servers)
	for name, srv := range c.Servers {
		srv.Command = slices.Clone(srv.Command)
		c.Servers[name] = srv
	}
	if p.Session != nil {
		s := *p.Session
		c.Session = &s
	}
	c.Providers = slices.Clone(p.Providers)
	for i := range c.Providers {
		c.Providers[i].Endpoints = slices.Clone(c.Providers[i].Endpoints)
	}
	return &c
}

// Locate returns where field (a YAML path such as "network.allow[0].dest")
// is written in the profile's file: at its value when that is a scalar,
// else at its key, else at its nearest written parent; line 0 when nothing
// of it is.
func (p *Profile) Locate(field string) (file string, line, col int) {
	if p.src == nil {
		return "", 0, 0
	}
	e := p.src.errorAt(field, "")
	return e.File, e.Line, e.Col
}

// Written reports whether field is written in the profile's file (rather
// than filled in with its default).
func (p *Profile) Written(field string) bool { return p.src != nil && p.src.has(field) }

// File is the name of the file the profile was read from.
func (p *Profile) File() string {
	if p.src == nil {
		return ""
	}
	return p.src.name
}

func cloneDests(ds []Destination) []Destination {
	out := slices.Clone(ds)
	for i := range out {
		out[i].Methods = slices.Clone(out[i].Methods)
	}
	return out
}
