package server

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/config"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// HTTPLimits bound what the HTTP server gives each client: time, header
// bytes and connections (the `http` section of the configuration).
type HTTPLimits struct {
	// ReadHeaderTimeout ends a connection whose request line and headers
	// take longer than this to arrive (slowloris).
	ReadHeaderTimeout string `yaml:"read_header_timeout"`
	// BodyTimeout ends a request whose body sends nothing for this long;
	// a body that keeps coming is not cut.
	BodyTimeout string `yaml:"body_timeout"`
	// WriteTimeout ends a connection whose client reads nothing of its
	// answer for this long; a long stream that is read is not cut.
	WriteTimeout string `yaml:"write_timeout"`
	// IdleTimeout closes a kept-alive connection idle for this long.
	IdleTimeout string `yaml:"idle_timeout"`
	// MaxHeaderBytes bounds the request line and headers (431 beyond).
	MaxHeaderBytes string `yaml:"max_header_bytes"`
	// MaxURLBytes bounds a request's URL (414 beyond, before anything is
	// recorded).
	MaxURLBytes string `yaml:"max_url_bytes"`
	// MaxConnections bounds the open connections; MaxConnectionsPerRemote
	// the open connections of one remote address (an IPv6 /64).
	MaxConnections          int `yaml:"max_connections"`
	MaxConnectionsPerRemote int `yaml:"max_connections_per_remote"`

	readHeader, body, write, idle time.Duration
	headerBytes, urlBytes         int
}

// Rate is a token bucket: Rate requests a second on average, Burst at
// once.
type Rate struct {
	Rate  float64 `yaml:"rate"`
	Burst int     `yaml:"burst"`
}

// RateLimits bound how often clients may call (the `rate_limit` section).
type RateLimits struct {
	// Token is every token's rate unless the token sets its own.
	Token Rate `yaml:"token"`
	// Remote bounds the requests without a valid token, per remote
	// address.
	Remote Rate `yaml:"remote"`
	// Record and RecordTotal bound how many requests without a valid token
	// are recorded in the audit log, per remote address and in all; the
	// others are counted (cordon_requests_unrecorded_total) and summed up
	// in an api_requests_unrecorded record every minute.
	Record      Rate `yaml:"record"`
	RecordTotal Rate `yaml:"record_total"`
}

// Retention bounds the audit log's files on disk (the `audit_retention`
// section): rotated files beyond MaxBytes in all, or whose last record is
// older than MaxAge, are removed (or moved to Archive), oldest first; the
// index drops what they held and records older than MaxAge, and sessions
// not updated for MaxAge are forgotten. "off" keeps everything.
type Retention struct {
	MaxBytes string `yaml:"max_bytes"`
	MaxAge   string `yaml:"max_age"`
	Archive  string `yaml:"archive"`

	bytes int64         // 0: no bound
	age   time.Duration // 0: no bound
}

// Defaults of the limits.
const (
	DefaultReadHeaderTimeout       = 10 * time.Second
	DefaultBodyTimeout             = time.Minute
	DefaultWriteTimeout            = time.Minute
	DefaultHTTPIdleTimeout         = 2 * time.Minute
	DefaultMaxHeaderBytes          = 64 << 10
	DefaultMaxURLBytes             = 8 << 10
	DefaultMaxConnections          = 1024
	DefaultMaxConnectionsPerRemote = 128
	DefaultRetentionBytes          = audit.DefaultRetentionBytes
	DefaultRetentionAge            = audit.DefaultRetentionAge
)

// Default rates.
var (
	DefaultTokenRate       = Rate{Rate: 50, Burst: 100}
	DefaultRemoteRate      = Rate{Rate: 10, Burst: 20}
	DefaultRecordRate      = Rate{Rate: 2, Burst: 10}
	DefaultRecordTotalRate = Rate{Rate: 20, Burst: 50}
)

// loadLimits checks the limits and fills in their defaults; at places an
// error in the file.
func (c *Config) loadLimits(at func(p, field, msg string) error) error {
	h := &c.HTTP
	var err error
	for _, d := range []struct {
		field, text string
		def         time.Duration
		to          *time.Duration
	}{
		{"read_header_timeout", h.ReadHeaderTimeout, DefaultReadHeaderTimeout, &h.readHeader},
		{"body_timeout", h.BodyTimeout, DefaultBodyTimeout, &h.body},
		{"write_timeout", h.WriteTimeout, DefaultWriteTimeout, &h.write},
		{"idle_timeout", h.IdleTimeout, DefaultHTTPIdleTimeout, &h.idle},
	} {
		if *d.to, err = duration(d.text, d.def); err != nil {
			return at("$.http."+d.field, "http."+d.field, err.Error())
		}
	}
	for _, s := range []struct {
		field, text string
		def, min    int
		to          *int
	}{
		{"max_header_bytes", h.MaxHeaderBytes, DefaultMaxHeaderBytes, 4 << 10, &h.headerBytes},
		{"max_url_bytes", h.MaxURLBytes, DefaultMaxURLBytes, 1 << 10, &h.urlBytes},
	} {
		*s.to = s.def
		if s.text == "" {
			continue
		}
		n, err := profile.ParseSize(s.text)
		if err != nil || n < int64(s.min) || n > 16<<20 {
			return at("$.http."+s.field, "http."+s.field, fmt.Sprintf("want a size from %s to 16MiB, found %q", profile.FormatSize(int64(s.min)), s.text))
		}
		*s.to = int(n)
	}
	if h.MaxConnections == 0 {
		h.MaxConnections = DefaultMaxConnections
	}
	if h.MaxConnectionsPerRemote == 0 {
		h.MaxConnectionsPerRemote = min(DefaultMaxConnectionsPerRemote, h.MaxConnections)
	}
	if h.MaxConnections < 1 || h.MaxConnectionsPerRemote < 1 || h.MaxConnectionsPerRemote > h.MaxConnections {
		return at("$.http.max_connections_per_remote", "http.max_connections_per_remote", fmt.Sprintf("want 1 to max_connections (%d)", h.MaxConnections))
	}
	rl := &c.RateLimit
	for _, r := range []struct {
		field string
		rate  *Rate
		def   Rate
	}{
		{"token", &rl.Token, DefaultTokenRate}, {"remote", &rl.Remote, DefaultRemoteRate},
		{"record", &rl.Record, DefaultRecordRate}, {"record_total", &rl.RecordTotal, DefaultRecordTotalRate},
	} {
		if err := r.rate.fill(r.def); err != nil {
			return at("$.rate_limit."+r.field, "rate_limit."+r.field, err.Error())
		}
	}
	for i, t := range c.Tokens {
		if t.RateLimit == nil {
			continue
		}
		if err := t.RateLimit.fill(rl.Token); err != nil {
			return at(fmt.Sprintf("$.tokens[%d].rate_limit", i), fmt.Sprintf("tokens[%d].rate_limit", i), err.Error())
		}
	}
	r := &c.AuditRetention
	if r.bytes, err = config.SizeOrOff(r.MaxBytes, DefaultRetentionBytes); err != nil {
		return at("$.audit_retention.max_bytes", "audit_retention.max_bytes", err.Error())
	}
	if r.age, err = config.AgeOrOff(r.MaxAge, DefaultRetentionAge); err != nil {
		return at("$.audit_retention.max_age", "audit_retention.max_age", err.Error())
	}
	if r.Archive != "" && !filepath.IsAbs(r.Archive) && c.File != "" {
		r.Archive = filepath.Join(filepath.Dir(c.File), r.Archive)
	}
	return nil
}

// fill checks a rate, with def for what it leaves out.
func (r *Rate) fill(def Rate) error {
	if r.Rate == 0 && r.Burst == 0 {
		*r = def
		return nil
	}
	if r.Rate == 0 {
		r.Rate = def.Rate
	}
	if r.Burst == 0 {
		r.Burst = max(1, int(2*r.Rate))
	}
	if r.Rate < 0 || r.Rate > 1e6 || r.Burst < 1 || r.Burst > 1e6 {
		return fmt.Errorf("want rate (requests a second) above 0 and burst of at least 1, found rate %g, burst %d", r.Rate, r.Burst)
	}
	return nil
}
