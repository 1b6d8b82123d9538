// Package approvals keeps the requests for a person's approval of held
// tool calls, durably: a request survives a restart of cordon, a decision
// is made once, and an approved call is claimed for running once.
//
// The store is a journal in a directory (by default
// $CORDON_STATE_DIR/approvals): one JSON line per change, appended and
// fsynced under an exclusive lock, so that the gateway holding a call, the
// command line and the web page of another process see the same state.
// The state of a request is the fold of its lines: pending, then approved
// or denied (by a named approver, with a reason) or expired, then, for an
// approved call, running and done.
package approvals

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/config"
)

// States of a request.
const (
	Pending  = "pending"
	Approved = "approved"
	Denied   = "denied"
	Expired  = "expired"
	Running  = "running"
	Done     = "done"
)

// Scopes of an approval.
const (
	// ScopeCall approves the one call.
	ScopeCall = "call"
	// ScopeSession approves identical calls for the rest of the session.
	ScopeSession = "session"
)

// Recent is one earlier call of the session, for context.
type Recent struct {
	Step  int    `json:"step"`
	Call  string `json:"call"`
	Allow bool   `json:"allow"`
	Held  bool   `json:"held,omitempty"`
	Rule  string `json:"rule"`
}

// Request is what an approver sees: the exact call and its context.
type Request struct {
	ID      string          `json:"id"`
	Created time.Time       `json:"created"`
	Expires time.Time       `json:"expires"`
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"args"`
	Class   string          `json:"class"`
	// Reversible is false for the classes that cannot be undone.
	Reversible bool   `json:"reversible"`
	Rule       string `json:"rule"`
	Reason     string `json:"reason"`
	// Labels are the labels the session carries; Recent its last calls.
	Labels []string `json:"labels"`
	Recent []Recent `json:"recent"`
	Agent  string   `json:"agent"`
	// Profile is the profile's file and ProfileHash its SHA-256: the
	// gateway of that profile runs the call once approved.
	Profile     string `json:"profile"`
	ProfileHash string `json:"profile_hash"`
	Session     string `json:"session"`
	Step        int    `json:"step"`
	// Approvers, when not empty, are the only names whose decisions count.
	Approvers []string `json:"approvers,omitempty"`
	// Files are the files the call's path arguments were decided on, by
	// argument: what is approved is these files, and a call whose paths
	// name others when it comes to run is refused.
	Files map[string]File `json:"files,omitempty"`
}

// File is a path argument as it was decided: its resolved path, whether it
// exists (a new file's identity is its parent directory's), and its
// identity; Stamp and Above are the resolver's stamps of the directories
// on the path, compared before the call runs.
type File struct {
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	Dir    bool   `json:"dir,omitempty"`
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Links  uint64 `json:"links,omitempty"`
	Stamp  string `json:"stamp,omitempty"`
	Above  string `json:"above,omitempty"`
}

// Describe is f as an approver reads it.
func (f File) Describe() string {
	what := "the file"
	switch {
	case !f.Exists:
		return fmt.Sprintf("%s, a new file (in the directory of device %d, inode %d)", f.Path, f.Dev, f.Ino)
	case f.Dir:
		what = "the directory"
	}
	s := fmt.Sprintf("%s, %s of device %d, inode %d", f.Path, what, f.Dev, f.Ino)
	if f.Links > 1 {
		s += fmt.Sprintf(", which has %d names", f.Links)
	}
	return s
}

// Item is a request with its state.
type Item struct {
	Request
	State     string    `json:"state"`
	By        string    `json:"by,omitempty"`
	Why       string    `json:"why,omitempty"`
	Scope     string    `json:"scope,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	// Result says what became of an approved call.
	Result string `json:"result,omitempty"`
}

// change is one line of the journal.
type change struct {
	Op      string    `json:"op"` // request, decide, expire, claim, done
	ID      string    `json:"id"`
	Time    time.Time `json:"time"`
	Request *Request  `json:"request,omitempty"`
	State   string    `json:"state,omitempty"`
	By      string    `json:"by,omitempty"`
	Why     string    `json:"why,omitempty"`
	Scope   string    `json:"scope,omitempty"`
	Result  string    `json:"result,omitempty"`
}

// Journal is where a store's lines live: a file on this host (the
// default), or a table several hosts share (internal/statedb).
type Journal interface {
	// Locked calls f with every line of the journal, oldest first, under
	// the journal's exclusive lock, and appends the lines f returns,
	// durably, before the lock is released.
	Locked(f func(lines [][]byte) ([][]byte, error)) error
	// Name names the journal in messages.
	Name() string
}

// Store is the approval requests kept in a journal.
type Store struct {
	dir string // the file journal's directory; "" for another journal
	j   Journal
	now func() time.Time
}

// DefaultDir is the store's directory on this host: approvals in cordon's
// state directory.
func DefaultDir() string { return filepath.Join(config.StateDir(), "approvals") }

// Open opens (creating) the store in dir; now is the clock (nil for the
// wall clock).
func Open(dir string, now func() time.Time) (*Store, error) {
	// Only the store's own directory is private; the ones above it are
	// made as any state directory would be.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("approval store: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("approval store: %w", err)
	}
	s, err := OpenJournal(fileJournal(filepath.Join(dir, "requests.jsonl")), now)
	if s != nil {
		s.dir = dir
	}
	return s, err
}

// OpenJournal opens the store kept in j.
func OpenJournal(j Journal, now func() time.Time) (*Store, error) {
	if now == nil {
		now = time.Now
	}
	s := &Store{j: j, now: now}
	// Read it once, so that a damaged journal is found now.
	if err := s.locked(func(map[string]*Item) ([]change, error) { return nil, nil }); err != nil {
		return nil, err
	}
	return s, nil
}

// Dir is the store's directory ("" when it is not a file on this host).
func (s *Store) Dir() string { return s.dir }

// Name names where the store is.
func (s *Store) Name() string { return s.j.Name() }

// locked runs f on the current state under the journal's lock and
// appends, durably, the changes it returns.
func (s *Store) locked(f func(items map[string]*Item) ([]change, error)) error {
	return s.j.Locked(func(lines [][]byte) ([][]byte, error) {
		items, err := s.fold(lines)
		if err != nil {
			return nil, err
		}
		changes, err := f(items)
		if err != nil || len(changes) == 0 {
			return nil, err
		}
		out := make([][]byte, len(changes))
		for i, c := range changes {
			if out[i], err = json.Marshal(c); err != nil {
				return nil, fmt.Errorf("approval store: %w", err)
			}
		}
		return out, nil
	})
}

// fold folds the journal's lines into the state of every request.
func (s *Store) fold(lines [][]byte) (map[string]*Item, error) {
	items := map[string]*Item{}
	for i, line := range lines {
		n := i + 1
		var c change
		if err := json.Unmarshal(line, &c); err != nil {
			return nil, fmt.Errorf("approval store: %s:%d: damaged (%v); no call is approved until it is repaired", s.j.Name(), n, err)
		}
		it := items[c.ID]
		if c.Op == "request" {
			if c.Request == nil || it != nil {
				return nil, fmt.Errorf("approval store: %s:%d: damaged (a request twice, or without its call)", s.j.Name(), n)
			}
			items[c.ID] = &Item{Request: *c.Request, State: Pending}
			continue
		}
		if it == nil {
			return nil, fmt.Errorf("approval store: %s:%d: damaged (a change to the unknown request %s)", s.j.Name(), n, c.ID)
		}
		switch c.Op {
		case "decide":
			it.State, it.By, it.Why, it.Scope, it.DecidedAt = c.State, c.By, c.Why, c.Scope, c.Time
		case "expire":
			it.State, it.By, it.Why, it.DecidedAt = Expired, "cordon", c.Why, c.Time
		case "claim":
			it.State = Running
		case "done":
			it.State, it.Result = Done, c.Result
		default:
			return nil, fmt.Errorf("approval store: %s:%d: damaged (unknown change %q)", s.j.Name(), n, c.Op)
		}
	}
	// A pending request past its time is expired to every reader.
	now := s.now()
	for _, it := range items {
		if it.State == Pending && now.After(it.Expires) {
			it.State, it.By, it.Why = Expired, "cordon", "not decided in time"
		}
	}
	return items, nil
}

// fileJournal is a journal in a file: one JSON line per change, appended
// and fsynced under an exclusive flock.
type fileJournal string

func (f fileJournal) Name() string { return string(f) }

func (f fileJournal) Locked(fn func(lines [][]byte) ([][]byte, error)) error {
	j, err := os.OpenFile(string(f), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("approval store: %w", err)
	}
	defer j.Close()
	if err := syscall.Flock(int(j.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("approval store: lock: %w", err)
	}
	var lines [][]byte
	sc := bufio.NewScanner(j)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("approval store: %w", err)
	}
	out, err := fn(lines)
	if err != nil || len(out) == 0 {
		return err
	}
	var buf bytes.Buffer
	for _, l := range out {
		buf.Write(append(l, '\n'))
	}
	if _, err := j.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("approval store: %w", err)
	}
	if err := j.Sync(); err != nil {
		return fmt.Errorf("approval store: %w", err)
	}
	return nil
}

// Add records a new pending request and returns its id.
func (s *Store) Add(r Request) (string, error) {
	b := make([]byte, 6)
	rand.Read(b)
	r.ID = hex.EncodeToString(b)
	r.Created = s.now().UTC()
	err := s.locked(func(map[string]*Item) ([]change, error) {
		return []change{{Op: "request", ID: r.ID, Time: r.Created, Request: &r}}, nil
	})
	return r.ID, err
}

// Get returns one request.
func (s *Store) Get(id string) (Item, error) {
	var out Item
	err := s.locked(func(items map[string]*Item) ([]change, error) {
		it, ok := items[id]
		if !ok {
			return nil, fmt.Errorf("no approval request %q", id)
		}
		out = *it
		return nil, nil
	})
	return out, err
}

// List returns the requests in the given states (all when none), oldest
// first.
func (s *Store) List(states ...string) ([]Item, error) {
	var out []Item
	err := s.locked(func(items map[string]*Item) ([]change, error) {
		for _, it := range items {
			if len(states) == 0 || slices.Contains(states, it.State) {
				out = append(out, *it)
			}
		}
		return nil, nil
	})
	slices.SortFunc(out, func(a, b Item) int { return a.Created.Compare(b.Created) })
	return out, err
}

// ErrDecided is a decision on a request that is no longer pending.
var ErrDecided = errors.New("already decided")

// Decide approves or denies a pending request, once, by a named approver
// with a reason; scope is ScopeCall or ScopeSession.
func (s *Store) Decide(id string, approve bool, by, why, scope string) (Item, error) {
	by = strings.TrimSpace(by)
	if by == "" {
		return Item{}, fmt.Errorf("an approver must be named")
	}
	if scope == "" {
		scope = ScopeCall
	}
	if scope != ScopeCall && scope != ScopeSession {
		return Item{}, fmt.Errorf("scope %q: want %s or %s", scope, ScopeCall, ScopeSession)
	}
	var out Item
	err := s.locked(func(items map[string]*Item) ([]change, error) {
		it, ok := items[id]
		if !ok {
			return nil, fmt.Errorf("no approval request %q", id)
		}
		if it.State != Pending {
			return nil, fmt.Errorf("request %s: %w (%s)", id, ErrDecided, it.State)
		}
		if len(it.Approvers) > 0 && !slices.Contains(it.Approvers, by) {
			return nil, fmt.Errorf("request %s: %s is not an approver of this profile (%s)", id, by, strings.Join(it.Approvers, ", "))
		}
		state := Denied
		if approve {
			state = Approved
		}
		now := s.now().UTC()
		it.State, it.By, it.Why, it.Scope, it.DecidedAt = state, by, why, scope, now
		out = *it
		return []change{{Op: "decide", ID: id, Time: now, State: state, By: by, Why: why, Scope: scope}}, nil
	})
	return out, err
}

// Expire denies a request that was not decided in time; it is a no-op on
// one already decided.
func (s *Store) Expire(id, why string) error {
	return s.locked(func(items map[string]*Item) ([]change, error) {
		it, ok := items[id]
		if !ok || (it.State != Pending && it.State != Expired) {
			return nil, nil
		}
		return []change{{Op: "expire", ID: id, Time: s.now().UTC(), Why: why}}, nil
	})
}

// Claim marks an approved request as running; it succeeds once, so an
// approved call runs once however many gateways see the approval.
func (s *Store) Claim(id string) (bool, error) {
	ok := false
	err := s.locked(func(items map[string]*Item) ([]change, error) {
		it, found := items[id]
		if !found || it.State != Approved {
			return nil, nil
		}
		ok = true
		return []change{{Op: "claim", ID: id, Time: s.now().UTC()}}, nil
	})
	return ok, err
}

// Finish records what became of a claimed call.
func (s *Store) Finish(id, result string) error {
	return s.locked(func(map[string]*Item) ([]change, error) {
		return []change{{Op: "done", ID: id, Time: s.now().UTC(), Result: result}}, nil
	})
}

// Wait polls the request until it is no longer pending, or ctx ends.
func (s *Store) Wait(ctx context.Context, id string, every time.Duration) (Item, error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		it, err := s.Get(id)
		if err != nil || it.State != Pending {
			return it, err
		}
		select {
		case <-ctx.Done():
			return it, ctx.Err()
		case <-t.C:
		}
	}
}

// DecideRecorded is Decide, with the decision then appended to the audit
// log (durable before it returns).
func (s *Store) DecideRecorded(log *audit.Log, id string, approve bool, by, reason, scope string) (Item, error) {
	it, err := s.Decide(id, approve, by, reason, scope)
	if err != nil {
		return it, err
	}
	err = log.Append(audit.Event{Sandbox: it.Session, Agent: it.Agent, Kind: audit.Decision, Type: "approval_decision",
		Data: map[string]any{"id": it.ID, "tool": it.Tool, "approve": approve, "by": it.By, "reason": it.Why, "scope": it.Scope}})
	if err != nil {
		return it, fmt.Errorf("the decision is taken, but not in the audit log: %w", err)
	}
	return it, nil
}
