package config

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// Retention bounds the audit log's files on the disk (`audit.retention`;
// cordon serve's is `audit_retention` in its own configuration): past
// MaxBytes together, or older than MaxAge, rotated files are removed (or
// moved to Archive), oldest first. "" is the default, "off" no bound.
type Retention struct {
	MaxBytes string `yaml:"max_bytes"`
	MaxAge   string `yaml:"max_age"`
	Archive  string `yaml:"archive"`
}

// Policy reads r; a relative Archive is taken from dir.
func (r Retention) Policy(dir string) (audit.Retention, error) {
	var p audit.Retention
	var err error
	if p.MaxBytes, err = SizeOrOff(r.MaxBytes, audit.DefaultRetentionBytes); err != nil {
		return p, fmt.Errorf("audit.retention.max_bytes: %w", err)
	}
	if p.MaxAge, err = AgeOrOff(r.MaxAge, audit.DefaultRetentionAge); err != nil {
		return p, fmt.Errorf("audit.retention.max_age: %w", err)
	}
	p.Archive = r.Archive
	if p.Archive != "" && !filepath.IsAbs(p.Archive) {
		p.Archive = filepath.Join(dir, p.Archive)
	}
	return p, nil
}

// SizeOrOff reads a size of at least 1MiB, "off" (0: no bound) or ""
// (def).
func SizeOrOff(text string, def int64) (int64, error) {
	switch text {
	case "":
		return def, nil
	case "off":
		return 0, nil
	}
	n, err := profile.ParseSize(text)
	if err != nil || n < 1<<20 {
		return 0, fmt.Errorf("want a size of at least 1MiB such as 1GiB, or off, found %q", text)
	}
	return n, nil
}

// AgeOrOff reads an age of at least an hour such as 30d or 36h, "off" (0:
// no bound) or "" (def).
func AgeOrOff(text string, def time.Duration) (time.Duration, error) {
	switch text {
	case "":
		return def, nil
	case "off":
		return 0, nil
	}
	bad := fmt.Errorf("want an age of at least 1h such as 30d or 36h, or off, found %q", text)
	if days, ok := strings.CutSuffix(text, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 || n > 100000 {
			return 0, bad
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(text)
	if err != nil || d < time.Hour {
		return 0, bad
	}
	return d, nil
}
