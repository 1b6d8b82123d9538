package toolpolicy

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

const filesProfile = `version: 1
agent: t
tools:
  read_file:
    class: read
    labels:
      - arg: path
        glob: '**/.env*'
        labels: [secret]
      - arg: path
        glob: '**/.ssh/**'
        labels: [secret]
      - arg: path
        prefix: crm/
        labels: [pii]
  write_file:
    class: write
    constraints: ['args.path.within("notes/")']
  vault:
    class: read
    returns: [secret]
  fetch:
    class: external
`

const ws = "/work/app"

// file is a resolved path argument, as the gateway gives it.
func file(path string, ino uint64, links uint64) Call {
	return Call{Tool: "read_file", Args: map[string]any{"path": path}, Workspace: ws,
		Files: map[string]File{"path": {Path: path, Exists: true, Dev: 1, Ino: ino, Links: links}}}
}

// Label rules match the file a path resolves to: the canonical path the
// gateway gives, by glob relative to the workspace or absolute prefix;
// a file with other names carries every label a rule on its argument
// gives.
func TestLabelsOfFiles(t *testing.T) {
	s := NewSession(load(t, filesProfile), nil)
	for _, tt := range []struct {
		c    Call
		want string
	}{
		{file(ws+"/.env", 2, 1), "secret"},
		{file(ws+"/.env.production", 3, 1), "secret"},
		{file(ws+"/deploy/.env.local", 4, 1), "secret"},
		{file("/root/.ssh/id_rsa", 5, 1), "secret"},
		{file(ws+"/.ssh/id_rsa", 6, 1), "secret"},
		{file(ws+"/crm/a.csv", 7, 1), "pii"},
		{file("/crm/a.csv", 8, 1), ""},
		{file(ws+"/README.md", 9, 1), ""},
		{file(ws+"/README.md", 9, 2), "pii,secret"},
	} {
		if got := strings.Join(s.ResultLabels(tt.c), ","); got != tt.want {
			t.Errorf("%s (links %d): %q, want %q", tt.c.Files["path"].Path, tt.c.Files["path"].Links, got, tt.want)
		}
	}
}

// Constraints read a path as a file in the workspace.
func TestWithinConstraint(t *testing.T) {
	s := NewSession(load(t, filesProfile), nil)
	for path, allow := range map[string]bool{ws + "/notes/a.md": true, ws + "/README.md": false, ws + "/notes-x/a": false} {
		c := Call{Tool: "write_file", Args: map[string]any{"path": path, "content": "x"}, Workspace: ws,
			Files: map[string]File{"path": {Path: path, Dev: 1, Ino: 1}}}
		if d := s.Decide(c); d.Allow != allow {
			t.Errorf("%s: %+v", path, d)
		}
	}
	// Without the workspace a relative dir cannot be read: refused.
	if d := s.Decide(Call{Tool: "write_file", Args: map[string]any{"path": ws + "/notes/a"}}); d.Allow || !strings.Contains(d.Reason, "cannot be evaluated") {
		t.Errorf("no workspace: %+v", d)
	}
}

// What a failed call showed the agent brings its labels in; a call that
// showed nothing brings none.
func TestFailedResultLabels(t *testing.T) {
	p := load(t, filesProfile)
	s := NewSession(p, nil)
	c := Call{Tool: "vault"}
	s.Decide(c)
	s.Record(1, c, true, false)
	if len(s.Labels()) != 0 {
		t.Errorf("nothing shown, labels %v", s.Labels())
	}
	s.Decide(c)
	s.Record(2, c, true, true)
	if !slices.Equal(s.Labels(), []string{"secret"}) {
		t.Errorf("an error shown: labels %v", s.Labels())
	}
	if d := s.Decide(Call{Tool: "fetch"}); d.Allow || d.Because != 2 {
		t.Errorf("fetch after an error with a secret: %+v", d)
	}
}

// A file written while the session carried a label keeps it, by path and
// by identity, for a later session's read through the same FileLabels.
func TestWrittenFilesKeepLabels(t *testing.T) {
	p := load(t, filesProfile)
	shared := NewFileLabels()
	s := NewSession(p, nil)
	s.ShareFiles(shared)
	s.Record(1, Call{Tool: "vault"}, false, true)
	w := Call{Tool: "write_file", Args: map[string]any{"path": ws + "/notes/copy"}, Workspace: ws,
		Files: map[string]File{"path": {Path: ws + "/notes/copy", Dev: 1, Ino: 40}}}
	s.Record(2, w, false, true)
	existing := Call{Tool: "write_file", Args: map[string]any{"path": ws + "/notes/old"}, Workspace: ws,
		Files: map[string]File{"path": {Path: ws + "/notes/old", Exists: true, Dev: 1, Ino: 41, Links: 1}}}
	s.Record(3, existing, true, true) // failed, and still labelled
	later := NewSession(p, nil)
	later.ShareFiles(shared)
	for _, c := range []Call{file(ws+"/notes/copy", 99, 1), file(ws+"/other-name", 41, 1)} {
		if got := later.ResultLabels(c); !slices.Equal(got, []string{"secret"}) {
			t.Errorf("%v: %v", c.Files, got)
		}
	}
	if got := later.ResultLabels(file(ws+"/notes/else", 42, 1)); len(got) != 0 {
		t.Errorf("an unwritten file: %v", got)
	}
	// A name carries data: a listing or a search of a directory that
	// holds a file written while labelled shows its name, and carries its
	// labels; one of another directory does not.
	dir := func(path string, ino uint64) Call {
		return Call{Tool: "read_file", Args: map[string]any{"path": path}, Workspace: ws,
			Files: map[string]File{"path": {Path: path, Exists: true, Dir: true, Dev: 1, Ino: ino, Links: 2}}}
	}
	for _, d := range []string{ws + "/notes", ws} {
		if got := later.ResultLabels(dir(d, 50)); !slices.Equal(got, []string{"secret"}) {
			t.Errorf("a listing of %s: %v", d, got)
		}
	}
	if got := later.ResultLabels(dir(ws+"/docs", 51)); len(got) != 0 {
		t.Errorf("a listing of docs: %v", got)
	}
}

// The map of written files is bounded; past the bound, every file read
// carries the labels of those it could not keep.
func TestWrittenFilesBounded(t *testing.T) {
	s := NewSession(load(t, filesProfile), nil)
	s.Record(1, Call{Tool: "vault"}, false, true)
	for i := range MaxFiles + 1 {
		p := fmt.Sprintf("%s/notes/%d", ws, i)
		s.Record(2, Call{Tool: "write_file", Args: map[string]any{"path": p}, Workspace: ws, Files: map[string]File{"path": {Path: p}}}, false, true)
	}
	if n := s.files.Len(); n > MaxFiles {
		t.Errorf("%d files kept", n)
	}
	if got := s.ResultLabels(file(ws+"/README.md", 9, 1)); !slices.Equal(got, []string{"secret"}) {
		t.Errorf("after the bound, a file read: %v", got)
	}
}

// BenchmarkDecideFiles decides calls on resolved files: a read whose
// result is labelled by glob rules (and recorded, so its labels are
// matched), and a write held to notes/ by a path constraint.
func BenchmarkDecideFiles(b *testing.B) {
	p := load(b, filesProfile)
	s := NewSession(p, nil)
	s.ShareFiles(NewFileLabels())
	read := file(ws+"/deploy/config/.env.production", 7, 1)
	write := Call{Tool: "write_file", Args: map[string]any{"path": ws + "/notes/summary.md", "content": "x"}, Workspace: ws,
		Files: map[string]File{"path": {Path: ws + "/notes/summary.md", Exists: true, Dev: 1, Ino: 8, Links: 1}}}
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		if d := s.Decide(read); !d.Allow {
			b.Fatal(d.Reason)
		}
		s.Record(s.Steps(), read, false, true)
		took = append(took, time.Since(start))
		start = time.Now()
		if d := s.Decide(write); !d.Allow {
			b.Fatal(d.Reason)
		}
		s.Record(s.Steps(), write, false, true)
		took = append(took, time.Since(start))
	}
	latencies(b, took)
}

// Calls refused outside the policy's decision (arguments that cannot be
// decided, a path that named another file when the call ran) count as
// refusals: enough of them trip the probing rule.
func TestRefusalsOutsideTheDecisionCount(t *testing.T) {
	const prof = filesProfile + `trajectory:
  probing:
    denials: 3
    window: 10
    action: stop
`
	read := file(ws+"/README.md", 9, 1)
	s := NewSession(load(t, prof), nil)
	for range 3 {
		s.RefusedBefore(Call{Tool: "read_file", Args: map[string]any{"sent": `{"path":"a","Path":"b"}`}})
	}
	if d := s.Decide(read); d.Allow || d.Rule != "trajectory.probing" {
		t.Errorf("after 3 refusals before a decision: %+v", d)
	}
	s = NewSession(load(t, prof), nil)
	for range 3 {
		if d := s.Decide(read); !d.Allow {
			t.Fatalf("%+v", d)
		}
		s.Overturned()
	}
	if d := s.Decide(read); d.Allow || d.Rule != "trajectory.probing" {
		t.Errorf("after 3 calls overturned: %+v", d)
	}
	// Not overturned: allowed as before.
	s = NewSession(load(t, prof), nil)
	for range 4 {
		if d := s.Decide(read); !d.Allow {
			t.Errorf("%+v", d)
		}
	}
}
