package server

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"

	"github.com/cordon-sandbox/cordon/internal/approval"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/statedb"
	"github.com/cordon-sandbox/cordon/internal/token"

	"github.com/cordon-sandbox/cordon/internal/hostfile"
)

// Config is cordon serve's configuration file: the agents it serves, each
// with its profile and its pool, and the tokens that may use it.
type Config struct {
	// Listen is the address to serve on (default 127.0.0.1:8700).
	Listen string `yaml:"listen"`
	// State is where sandboxes' private workspaces are made (default: a
	// directory under cordon's state directory).
	State string `yaml:"state"`
	// AuditSync is when the records of a request reach the disk: "each"
	// (the default: fsynced before the answer), or an interval such as
	// "100ms" (written before the answer, so they survive cordon, and
	// fsynced within the interval, so a power cut or a kernel crash loses
	// at most that much).
	AuditSync string `yaml:"audit_sync"`
	// Database keeps the approvals, the audit index and the sessions: an
	// SQLite file (default: db/cordon.db in the state directory; a
	// relative path is the configuration file's), or a postgres:// URL
	// that several nodes share (CORDON_DATABASE when unset); Node names
	// this node in it, the same across its restarts (CORDON_NODE when
	// unset, else the host's name: see FromEnv).
	Database string `yaml:"database"`
	Node     string `yaml:"node"`
	// ProbeEvery runs the escape probes on every agent's profile at start,
	// when the profile changes, and this often ("6h"); empty: never.
	ProbeEvery string            `yaml:"probe_every"`
	Agents     map[string]*Agent `yaml:"agents"`
	Tokens     []*Token          `yaml:"tokens"`
	// MinFreeSpace is the free space under the audit log and the state
	// directory below which /v1/health reports the server degraded
	// (default 256MiB).
	MinFreeSpace string `yaml:"min_free_space"`
	// DrainGrace is how long a stopping server (SIGTERM, SIGINT) lets
	// running commands finish before it ends their sandboxes (default
	// 30s).
	DrainGrace string `yaml:"drain_grace"`
	// MaxSandboxes bounds the live sandboxes of every agent on every node
	// sharing the database (0, the default: no bound but each agent's
	// max_sandboxes on each node).
	MaxSandboxes int `yaml:"max_sandboxes"`
	// HTTP, RateLimit and AuditRetention bound what clients may take of
	// the server: see limits.go.
	HTTP           HTTPLimits `yaml:"http"`
	RateLimit      RateLimits `yaml:"rate_limit"`
	AuditRetention Retention  `yaml:"audit_retention"`

	// Commands bounds the commands running at once and what each may
	// cost the server.
	Commands Commands `yaml:"commands"`

	// Cluster is how this node works with the others sharing the
	// database: nodes.go.
	Cluster Cluster `yaml:"cluster"`

	File       string        `yaml:"-"`
	SyncEvery  time.Duration `yaml:"-"` // 0: each
	ProbeSched time.Duration `yaml:"-"` // 0: none
	MinFree    int64         `yaml:"-"` // 0: DefaultMinFree
	Grace      time.Duration `yaml:"-"`
}

// Agent is one agent the server builds sandboxes for.
type Agent struct {
	// Profile is the agent's profile file, relative to the configuration
	// file; "default" is the embedded default profile.
	Profile string `yaml:"profile"`
	// Pool is how many sandboxes are kept built and waiting (default 0).
	Pool int `yaml:"pool"`
	// IdleTimeout ends a sandbox no command has used for this long
	// (default 10m); MaxLifetime ends any sandbox this old (default 1h).
	IdleTimeout string `yaml:"idle_timeout"`
	MaxLifetime string `yaml:"max_lifetime"`
	// MaxSandboxes bounds the agent's live sandboxes (default 64).
	MaxSandboxes int `yaml:"max_sandboxes"`

	Name        string           `yaml:"-"`
	ProfileFile string           `yaml:"-"` // absolute; "" for the default
	Loaded      *profile.Profile `yaml:"-"` // as loaded first (see Current)
	Idle        time.Duration    `yaml:"-"`
	Lifetime    time.Duration    `yaml:"-"`
	// Warnings are what the profile's governance said when it was loaded.
	Warnings []string `yaml:"-"`

	mu      sync.Mutex
	current *profile.Profile
	problem error  // why the profile on disk cannot be used now
	sum     string // SHA-256 of the profile file as last read
}

// Current returns the profile new sandboxes of the agent get, or why none
// can be built now.
func (a *Agent) Current() (*profile.Profile, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.problem != nil {
		return nil, a.problem
	}
	if a.current == nil {
		return a.Loaded, nil
	}
	return a.current, nil
}

// Reload reads the profile file again when it changed since it was last
// read, through its governance as at start. It reports whether the file
// changed, and the error that now keeps the agent from getting sandboxes.
func (a *Agent) Reload() (changed bool, err error) {
	if a.ProfileFile == "" {
		return false, nil
	}
	data, rerr := hostfile.ReadFile(a.ProfileFile, 1<<20)
	sum := sha256.Sum256(data)
	a.mu.Lock()
	if rerr == nil && hex.EncodeToString(sum[:]) == a.sum {
		a.mu.Unlock()
		return false, nil
	}
	a.mu.Unlock()
	b := &Agent{Name: a.Name, Profile: a.ProfileFile}
	err = b.load("/")
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sum = b.sum
	if err != nil {
		a.problem = fmt.Errorf("agent %s: %s can no longer be used: %w", a.Name, a.ProfileFile, err)
		return true, a.problem
	}
	a.problem, a.current, a.Warnings = nil, b.Loaded, b.Warnings
	return true, nil
}

// Token is one API token: bound to one agent, or an admin's.
type Token struct {
	Name  string `yaml:"name"`
	Agent string `yaml:"agent"`
	Admin bool   `yaml:"admin"`
	// SHA256 is the hex SHA-256 of the token; the token itself is never
	// stored.
	SHA256 string `yaml:"sha256"`
	// RateLimit is this token's rate (default: rate_limit.token).
	RateLimit *Rate `yaml:"rate_limit"`
}

// Defaults of an agent.
const (
	DefaultListen       = "127.0.0.1:8700"
	DefaultIdleTimeout  = 10 * time.Minute
	DefaultMaxLifetime  = time.Hour
	DefaultMaxSandboxes = 64
)

// validName reports whether s is an agent's name: lower-case letters,
// digits, '.', '_' and '-', starting with a letter or digit, at most 63.
func validName(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '.' || s[0] == '_' || s[0] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validSum reports whether s is a SHA-256 in lower-case hex.
func validSum(s string) bool { return token.ValidSum(s) }

// LoadConfig reads and checks the configuration at path, and loads every
// agent's profile, through its governance: a profile that requires approval
// and grew since is refused, as by cordon run. Errors name the file, line,
// column and field.
func LoadConfig(path string) (*Config, error) {
	data, err := hostfile.ReadFile(path, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("reading the server configuration: %w", err)
	}
	c := &Config{}
	if err := yaml.UnmarshalWithOptions(data, c, yaml.DisallowUnknownField(), yaml.Strict()); err != nil {
		return nil, fmt.Errorf("%s: %s", path, yaml.FormatError(err, false, false))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	c.File = abs
	at := locator(path, data)
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.AuditSync != "" && c.AuditSync != "each" {
		if c.SyncEvery, err = duration(c.AuditSync, 0); err != nil || c.SyncEvery > 10*time.Second {
			return nil, at("$.audit_sync", "audit_sync", fmt.Sprintf("want each, or an interval up to 10s such as 100ms, found %q", c.AuditSync))
		}
	}
	if c.ProbeEvery != "" {
		if c.ProbeSched, err = duration(c.ProbeEvery, 0); err != nil || c.ProbeSched < time.Minute {
			return nil, at("$.probe_every", "probe_every", fmt.Sprintf("want an interval of at least 1m, such as 6h, found %q", c.ProbeEvery))
		}
	}
	if c.Grace, err = duration(c.DrainGrace, DefaultDrainGrace); err != nil {
		return nil, at("$.drain_grace", "drain_grace", err.Error())
	}
	if c.MaxSandboxes < 0 {
		return nil, at("$.max_sandboxes", "max_sandboxes", "want 0 (no bound) or more")
	}
	if c.MinFreeSpace != "" {
		if c.MinFree, err = profile.ParseSize(c.MinFreeSpace); err != nil || c.MinFree <= 0 {
			return nil, at("$.min_free_space", "min_free_space", fmt.Sprintf("want a size such as 256MiB or 2GiB, found %q", c.MinFreeSpace))
		}
	}
	if c.Database != "" && !statedb.IsPostgres(c.Database) {
		if strings.Contains(c.Database, "://") {
			return nil, at("$.database", "database", fmt.Sprintf("want a postgres:// URL or an SQLite file's path, found %q", c.Database))
		}
		if p := statedb.File(c.Database); !filepath.IsAbs(p) {
			c.Database = filepath.Join(filepath.Dir(abs), p)
		}
	}
	if err := c.Commands.check(at); err != nil {
		return nil, err
	}
	if err := c.checkCluster(at); err != nil {
		return nil, err
	}
	if len(c.Agents) == 0 {
		return nil, at("$.agents", "agents", "name at least one agent")
	}
	names := make([]string, 0, len(c.Agents))
	for name := range c.Agents {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		a := c.Agents[name]
		field := "agents." + name
		if a == nil {
			return nil, at("$.agents."+name, field, "empty; give it a profile")
		}
		if !validName(name) {
			return nil, at("$.agents."+name, field, "an agent's name is lower-case letters, digits, '.', '_' and '-'")
		}
		a.Name = name
		if a.Idle, err = duration(a.IdleTimeout, DefaultIdleTimeout); err != nil {
			return nil, at("$.agents."+name+".idle_timeout", field+".idle_timeout", err.Error())
		}
		if a.Lifetime, err = duration(a.MaxLifetime, DefaultMaxLifetime); err != nil {
			return nil, at("$.agents."+name+".max_lifetime", field+".max_lifetime", err.Error())
		}
		if a.MaxSandboxes == 0 {
			a.MaxSandboxes = DefaultMaxSandboxes
		}
		if a.Pool < 0 || a.MaxSandboxes < 0 || a.Pool > a.MaxSandboxes {
			return nil, at("$.agents."+name+".pool", field+".pool", fmt.Sprintf("want 0 to max_sandboxes (%d)", a.MaxSandboxes))
		}
		if err := a.load(filepath.Dir(abs)); err != nil {
			msg := err.Error()
			if perrs := (profile.Errors{}); errors.As(err, &perrs) && len(perrs) > 1 {
				// Every problem of the profile, one a line.
				msg = fmt.Sprintf("%d problems in the profile:\n  %s", len(perrs), strings.ReplaceAll(msg, "\n", "\n  "))
			}
			return nil, at("$.agents."+name+".profile", field+".profile", msg)
		}
	}
	seen := map[string]bool{}
	for i, t := range c.Tokens {
		p := fmt.Sprintf("$.tokens[%d]", i)
		field := fmt.Sprintf("tokens[%d]", i)
		switch {
		case t == nil || t.Name == "":
			return nil, at(p, field+".name", "every token has a name (it is what the audit log records)")
		case seen[t.Name]:
			return nil, at(p+".name", field+".name", fmt.Sprintf("a second token named %q", t.Name))
		case !validSum(t.SHA256):
			return nil, at(p+".sha256", field+".sha256", "want the token's SHA-256 as 64 lower-case hex digits (cordon serve token prints it)")
		case t.Admin && t.Agent != "":
			return nil, at(p+".agent", field+".agent", "an admin token is bound to no agent; make two tokens")
		case !t.Admin && t.Agent == "":
			return nil, at(p, field, "a token is bound to an agent (agent: NAME) or is an admin's (admin: true)")
		case !t.Admin && c.Agents[t.Agent] == nil:
			return nil, at(p+".agent", field+".agent", fmt.Sprintf("no agent %q in agents", t.Agent))
		}
		seen[t.Name] = true
	}
	if len(c.Tokens) == 0 {
		return nil, at("$", "tokens", "name at least one token: the API refuses every request without one")
	}
	if err := c.loadLimits(at); err != nil {
		return nil, err
	}
	return c, nil
}

// load reads the agent's profile, relative to dir, and applies its
// governance.
func (a *Agent) load(dir string) error {
	if a.Profile == "" {
		return errors.New("name the agent's profile file (or \"default\")")
	}
	if a.Profile == "default" {
		a.Loaded = profile.Default()
		return nil
	}
	a.ProfileFile = a.Profile
	if !filepath.IsAbs(a.ProfileFile) {
		a.ProfileFile = filepath.Join(dir, a.ProfileFile)
	}
	p, err := profile.LoadFile(a.ProfileFile)
	if err != nil {
		return err
	}
	a.sum = p.FileDigest()
	if p.Agent != "" && p.Agent != a.Name {
		return fmt.Errorf("%s is the profile of agent %q, not %q", a.ProfileFile, p.Agent, a.Name)
	}
	warnings, err := approval.Gate(a.ProfileFile, p)
	if err != nil {
		return err
	}
	a.Loaded, a.Warnings = p, warnings
	return nil
}

func duration(text string, def time.Duration) (time.Duration, error) {
	if text == "" {
		return def, nil
	}
	d, err := time.ParseDuration(text)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want a duration such as 30s, 10m or 2h, found %q", text)
	}
	return d, nil
}

// locator returns a function that makes an error at the YAML path p of
// the file, with its line and column when the path is found.
func locator(name string, data []byte) func(p, field, msg string) error {
	file, _ := parser.ParseBytes(data, 0)
	return func(p, field, msg string) error {
		if path, err := yaml.PathString(p); err == nil && file != nil {
			if node, err := path.FilterFile(file); err == nil && node != nil {
				if tk := node.GetToken(); tk != nil && tk.Position != nil {
					return fmt.Errorf("%s:%d:%d: %s: %s", name, tk.Position.Line, tk.Position.Column, field, msg)
				}
			}
		}
		return fmt.Errorf("%s: %s: %s", name, field, msg)
	}
}

// NewToken makes a token and returns it with its SHA-256, the form the
// configuration stores.
func NewToken() (tok, sum string) { return token.New() }

// HashToken returns the hex SHA-256 of a token.
func HashToken(tok string) string { return token.Hash(tok) }

// Identify returns the token whose hash matches the presented token, or
// nil. Every stored hash is compared, in constant time.
func (c *Config) Identify(presented string) *Token {
	sums := make([]string, len(c.Tokens))
	for i, t := range c.Tokens {
		sums[i] = t.SHA256
	}
	if i := token.Match(presented, sums); i >= 0 {
		return c.Tokens[i]
	}
	return nil
}
