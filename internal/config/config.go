// Package config reads cordon's configuration file: the settings that
// belong to a host or a user rather than to one agent's profile (today,
// where the audit log goes and how it is signed). It is optional; every
// setting has a default, and CORDON_* variables and flags override it.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/goccy/go-yaml"

	"github.com/cordon-sandbox/cordon/internal/profile"

	"github.com/cordon-sandbox/cordon/internal/hostfile"
)

// Config is the configuration file's content.
type Config struct {
	Audit Audit `yaml:"audit"`
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
