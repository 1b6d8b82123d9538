// Package config reads cordon's configuration file: the settings that
// belong to a host or a user rather than to one agent's profile (where the
// audit log goes and how it is signed; who may decide held tool calls, and
// which MCP clients cordon mcp --http serves, each by a token of their
// own). It is optional; every setting has a default, and CORDON_*
// variables and flags override it.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/goccy/go-yaml"

	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/token"

	"github.com/cordon-sandbox/cordon/internal/hostfile"
)

// Config is the configuration file's content.
type Config struct {
	Audit Audit `yaml:"audit"`
	// Approvers are the people who decide held tool calls on the page and
	// the API of cordon approvals serve, each with a token of their own;
	// a decision is taken in the name of the token that made it.
	Approvers []Token `yaml:"approvers"`
	// MCPClients are the clients cordon mcp --http serves, each with a
	// token of its own: the agent whose labels and budgets its calls
	// share.
	MCPClients []Token `yaml:"mcp_clients"`
	// File is where it was read from; empty when there was none.
	File string `yaml:"-"`
}

// Audit configures the audit log.
type Audit struct {
	// Log is the log file.
	Log string `yaml:"log"`
	// Key is an Ed25519 private key (cordon audit keygen) that signs
	// checkpoints; none when empty.
	Key string `yaml:"key"`
	// MaxSize rotates the log past this size ("64MiB").
	MaxSize string `yaml:"max_size"`
	// Capture is how many bytes of each output stream the log keeps
	// ("4KiB").
	Capture string `yaml:"capture"`
	// Retention bounds the log's rotated files, applied after each run.
	Retention Retention `yaml:"retention"`
}

// Token is a bearer token of a named holder; only its SHA-256 is kept
// (cordon serve token makes one).
type Token struct {
	Name   string `yaml:"name"`
	SHA256 string `yaml:"sha256"`
}

// Identify returns the name of the token among tokens that the presented
// one is; false when it is none of them.
func Identify(tokens []Token, presented string) (string, bool) {
	sums := make([]string, len(tokens))
	for i, t := range tokens {
		sums[i] = t.SHA256
	}
	if i := token.Match(presented, sums); i >= 0 {
		return tokens[i].Name, true
	}
	return "", false
}

// checkTokens checks the approvers' and the MCP clients' tokens: named,
// each name once in its list, a SHA-256 each, and no token in both lists
// (an agent holding it could approve its own calls).
func (c *Config) checkTokens(path string) error {
	seen := map[string]string{}
	for _, l := range []struct {
		field  string
		tokens []Token
	}{{"approvers", c.Approvers}, {"mcp_clients", c.MCPClients}} {
		names := map[string]bool{}
		for i, t := range l.tokens {
			field := fmt.Sprintf("%s[%d]", l.field, i)
			switch {
			case !validTokenName(t.Name):
				return fmt.Errorf("%s: %s.name: want a name of 1 to 64 letters, digits, '.', '_', '-' or '@' (it is what the audit log records), found %q", path, field, t.Name)
			case names[t.Name]:
				return fmt.Errorf("%s: %s.name: a second token named %q", path, field, t.Name)
			case !token.ValidSum(t.SHA256):
				return fmt.Errorf("%s: %s.sha256: want the token's SHA-256 as 64 lower-case hex digits (cordon serve token prints it)", path, field)
			case seen[t.SHA256] != "":
				return fmt.Errorf("%s: %s.sha256: the same token as %s; every approver and every MCP client has a token of its own", path, field, seen[t.SHA256])
			}
			names[t.Name] = true
			seen[t.SHA256] = field
		}
	}
	return nil
}

func validTokenName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '@') {
			return false
		}
	}
	return true
}

// Path is where the configuration is read from: $CORDON_CONFIG, else
// /etc/cordon/config.yaml for root, else $XDG_CONFIG_HOME/cordon/config.yaml
// or ~/.config/cordon/config.yaml.
func Path() string {
	if p := os.Getenv("CORDON_CONFIG"); p != "" {
		return p
	}
	if os.Geteuid() == 0 {
		return "/etc/cordon/config.yaml"
	}
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "cordon", "config.yaml")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".config", "cordon", "config.yaml")
}

// Load reads the configuration (a missing file is no configuration),
// fills defaults and applies CORDON_AUDIT_LOG and CORDON_AUDIT_KEY.
func Load() (*Config, error) {
	c := &Config{}
	path := Path()
	data, err := hostfile.ReadFile(path, 1<<20)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("reading the configuration: %w", err)
	default:
		if err := yaml.UnmarshalWithOptions(data, c, yaml.DisallowUnknownField(), yaml.Strict()); err != nil {
			return nil, fmt.Errorf("%s: %s", path, yaml.FormatError(err, false, true))
		}
		c.File = path
		if err := c.checkTokens(path); err != nil {
			return nil, err
		}
	}
	if v := os.Getenv("CORDON_AUDIT_LOG"); v != "" {
		c.Audit.Log = v
	}
	if v := os.Getenv("CORDON_AUDIT_KEY"); v != "" {
		c.Audit.Key = v
	}
	if c.Audit.Log == "" {
		c.Audit.Log = DefaultAuditLog()
	}
	for _, f := range []struct{ name, value string }{{"audit.max_size", c.Audit.MaxSize}, {"audit.capture", c.Audit.Capture}} {
		if f.value != "" {
			if _, err := profile.ParseSize(f.value); err != nil {
				return nil, fmt.Errorf("%s: %s: %v", path, f.name, err)
			}
		}
	}
	if _, err := c.Audit.Retention.Policy(""); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return c, nil
}

// DefaultAuditLog is /var/log/cordon/audit.jsonl for root, else
// $XDG_STATE_HOME/cordon/audit.jsonl or ~/.local/state/cordon/audit.jsonl.
func DefaultAuditLog() string {
	if os.Geteuid() == 0 {
		return "/var/log/cordon/audit.jsonl"
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "cordon", "audit.jsonl")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "state", "cordon", "audit.jsonl")
}

// Size reads a size setting, or def when it is unset.
func Size(text string, def int64) int64 {
	if text == "" {
		return def
	}
	n, err := profile.ParseSize(text)
	if err != nil {
		return def
	}
	return n
}

// StateDir is where cordon keeps state on this host (probe reports,
// approval requests): $CORDON_STATE_DIR, else $XDG_STATE_HOME/cordon,
// else ~/.local/state/cordon.
func StateDir() string {
	if d := os.Getenv("CORDON_STATE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "cordon")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "/"
	}
	return filepath.Join(home, ".local", "state", "cordon")
}
