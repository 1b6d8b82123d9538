package server

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// Commands bounds what the commands of agents cost the server: how many
// run at once (exec, and file uploads and downloads, which run in the
// sandbox too), how much input one may carry, how much of the output of
// one that does not stream the server keeps, and how long a client may
// leave output unread.
type Commands struct {
	// PerSandbox, PerAgent and PerServer bound the commands running at
	// once in one sandbox, in all of an agent's, and in the server
	// (defaults 8, 32, 128); beyond one, a request is answered 429.
	PerSandbox int `yaml:"per_sandbox"`
	PerAgent   int `yaml:"per_agent"`
	PerServer  int `yaml:"per_server"`
	// MaxStdin bounds a command's stdin (default 8MiB); larger inputs go
	// through the files API.
	MaxStdin string `yaml:"max_stdin"`
	// MaxOutput bounds what the server keeps of the output of a command
	// that does not stream, below the profile's output limit (default
	// 64MiB): a command that writes more is stopped there.
	MaxOutput string `yaml:"max_output"`

	Stdin  int64 `yaml:"-"`
	Output int64 `yaml:"-"`
	// Send is how long a client may take none of the answer being sent
	// to it before the server stops sending: http.write_timeout.
	Send time.Duration `yaml:"-"`
}

// Defaults of commands. A command costs the server little besides its
// slot (about 200 KiB while it runs: two 64 KiB output buffers, the audit
// log's captures, the copies' buffers) and its stdin while it is decoded
// (up to about four times max_stdin); the sandbox's processes cost far
// more, and are bounded by the profile. 8 per sandbox is more than a
// build's parallel jobs need (make -j runs inside one command); 32 per
// agent lets an agent drive several sandboxes at once; 128 per server is
// four such agents at full use, and keeps the worst case of the server's
// memory for commands near 128 × (4 × 8 MiB) = 4 GiB, and its typical
// case near 128 × 200 KiB = 25 MiB.
const (
	DefaultCommandsPerSandbox = 8
	DefaultCommandsPerAgent   = 32
	DefaultCommandsPerServer  = 128
	DefaultMaxStdin           = 8 << 20
	DefaultMaxOutput          = 64 << 20
)

// check fills in the defaults and checks the values; at makes the error
// of a field.
func (c *Commands) check(at func(p, field, msg string) error) error {
	for _, n := range []struct {
		v    *int
		def  int
		name string
	}{{&c.PerSandbox, DefaultCommandsPerSandbox, "per_sandbox"}, {&c.PerAgent, DefaultCommandsPerAgent, "per_agent"}, {&c.PerServer, DefaultCommandsPerServer, "per_server"}} {
		if *n.v == 0 {
			*n.v = n.def
		}
		if *n.v < 0 {
			return at("$.commands."+n.name, "commands."+n.name, fmt.Sprintf("want a number of commands of at least 1, found %d", *n.v))
		}
	}
	for _, s := range []struct {
		text string
		v    *int64
		def  int64
		min  int64
		name string
	}{{c.MaxStdin, &c.Stdin, DefaultMaxStdin, 0, "max_stdin"}, {c.MaxOutput, &c.Output, DefaultMaxOutput, 1 << 10, "max_output"}} {
		*s.v = s.def
		if s.text == "" {
			continue
		}
		n, err := profile.ParseSize(s.text)
		if err != nil || n < s.min || n > 1<<40 {
			return at("$.commands."+s.name, "commands."+s.name, fmt.Sprintf("want a size from %s to 1TiB, such as 8MiB, found %q", profile.FormatSize(s.min), s.text))
		}
		*s.v = n
	}
	return nil
}

// limits returns the configured bounds, with the defaults where the
// configuration did not go through LoadConfig.
func (c *Commands) limits() Commands {
	out := *c
	out.check(func(p, field, msg string) error { return nil })
	return out
}

// slots counts the commands running, per sandbox, per agent and in all.
type slots struct {
	mu      sync.Mutex
	sandbox map[string]int
	agent   map[string]int
	total   int
}

// capError is a command refused because a cap on running commands is
// reached; cap names it.
type capError struct {
	cap string
	msg string
}

func (e *capError) Error() string { return e.msg }

// acquire takes a command's slot in sandbox id (none when "") of agent,
// or says which cap is reached. release gives it back, once.
func (s *Server) acquire(agent, id string) (release func(), err error) {
	lim := s.cmdLimits
	sl := &s.slots
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.sandbox == nil {
		sl.sandbox, sl.agent = map[string]int{}, map[string]int{}
	}
	switch {
	case id != "" && sl.sandbox[id] >= lim.PerSandbox:
		err = &capError{"per_sandbox", fmt.Sprintf("too many commands at once: sandbox %s runs %d, the most commands.per_sandbox allows; send it again once one has ended", id, lim.PerSandbox)}
	case sl.agent[agent] >= lim.PerAgent:
		err = &capError{"per_agent", fmt.Sprintf("too many commands at once: agent %s runs %d, the most commands.per_agent allows; send it again once one has ended", agent, lim.PerAgent)}
	case sl.total >= lim.PerServer:
		err = &capError{"per_server", fmt.Sprintf("too many commands at once: the server runs %d, the most commands.per_server allows; send it again once one has ended", lim.PerServer)}
	}
	if err != nil {
		s.metrics.add(1, "cordon_commands_refused_total", "agent", agent, "cap", err.(*capError).cap)
		return nil, err
	}
	if id != "" {
		sl.sandbox[id]++
	}
	sl.agent[agent]++
	sl.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			sl.mu.Lock()
			defer sl.mu.Unlock()
			if id != "" {
				if sl.sandbox[id]--; sl.sandbox[id] == 0 {
					delete(sl.sandbox, id)
				}
			}
			if sl.agent[agent]--; sl.agent[agent] == 0 {
				delete(sl.agent, agent)
			}
			sl.total--
		})
	}, nil
}

// slot takes a command's slot for a request, or answers 429 naming the
// cap: the status is 0 when the slot is taken.
func (s *Server) slot(w http.ResponseWriter, agent, id string) (func(), int) {
	release, err := s.acquire(agent, id)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		return nil, fail(w, http.StatusTooManyRequests, "%v", err)
	}
	return release, 0
}

// sendGuard is a response writer for a client that may stop reading:
// each write must complete within the send timeout. Once one did not, or
// failed, the client is taken as gone: the server cancels the request's
// context, which stops a command still running as a disconnect does, and
// the rest is dropped, reported as written, so that nothing waits on the
// client and the outcome is recorded.
type sendGuard struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	failed  atomic.Bool
	mu      sync.Mutex
}

func newSendGuard(w http.ResponseWriter, timeout time.Duration) *sendGuard {
	return &sendGuard{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout}
}

func (g *sendGuard) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed.Load() {
		return len(p), nil
	}
	g.rc.SetWriteDeadline(time.Now().Add(g.timeout))
	if _, err := g.ResponseWriter.Write(p); err != nil {
		g.failed.Store(true)
	}
	return len(p), nil
}

// Flush sends what is buffered, within the send timeout.
func (g *sendGuard) Flush() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed.Load() {
		return
	}
	g.rc.SetWriteDeadline(time.Now().Add(g.timeout))
	if err := g.rc.Flush(); err != nil {
		g.failed.Store(true)
	}
}

// Unwrap is for http.ResponseController.
func (g *sendGuard) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// done sends what is still buffered, within the send timeout, and lifts
// the deadline, which would otherwise stay on the connection for the
// requests that follow on it.
func (g *sendGuard) done() {
	g.Flush()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rc.SetWriteDeadline(time.Time{})
}

// inSandbox counts a command of a sandbox just built in its sandbox's
// slots (its agent's and the server's were taken before): returns the
// release.
func (s *Server) inSandbox(id string) func() {
	sl := &s.slots
	sl.mu.Lock()
	if sl.sandbox == nil {
		sl.sandbox, sl.agent = map[string]int{}, map[string]int{}
	}
	sl.sandbox[id]++
	sl.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			sl.mu.Lock()
			defer sl.mu.Unlock()
			if sl.sandbox[id]--; sl.sandbox[id] == 0 {
				delete(sl.sandbox, id)
			}
		})
	}
}

// execBody is the most an exec request's body may hold with stdin of at
// most maxStdin bytes: that in base64, and 1 MiB for the rest.
func execBody(maxStdin int64) int64 { return (maxStdin+2)/3*4 + 1<<20 }

// decodeCommand reads the body of a request that carries a command into
// v, stdin returning that command's input once read: a body or a stdin
// larger than commands.max_stdin is answered 413, other bad bodies 400.
// It returns the status answered, or 0.
func (s *Server) decodeCommand(w http.ResponseWriter, r *http.Request, v any, stdin func() []byte) int {
	max := s.cmdLimits.Stdin
	tooLarge := func() int {
		drainRefused(w, r)
		return fail(w, http.StatusRequestEntityTooLarge, "the request body is too large: a command's stdin may hold at most %s (commands.max_stdin); send larger inputs as a file (PUT %s/sandboxes/{id}/files) and read it from there", profile.FormatSize(max), api.Version)
	}
	limit := execBody(max)
	if r.ContentLength > limit {
		return tooLarge()
	}
	if err := decode(r, w, limit, v); err != nil {
		var big *http.MaxBytesError
		if errors.As(err, &big) {
			return tooLarge()
		}
		return fail(w, bodyStatus(err), "%v", err)
	}
	if int64(len(stdin())) > max {
		return tooLarge()
	}
	return 0
}
