package sandbox

import (
	"io"
	"slices"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/protect"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// A protected path is recognised where a line of standard error names it,
// absolute or from the working directory, together with a refusal; a name
// that only contains it, a path beneath a directory only pinned in place,
// standard output, and a failure of another kind are not.
func TestProtectedSaid(t *testing.T) {
	spec := &Spec{Spec: wire.Spec{Workdir: "/w/sub", Mounts: []Mount{
		{Source: "/host/w", Target: "/w", Writable: true, Protect: []protect.Entry{
			{Rel: ".git"}, {Rel: ".git/config", ReadOnly: true}, {Rel: ".git/hooks", ReadOnly: true},
			{Rel: ".vscode", ReadOnly: true}, {Rel: "agent.yaml", ReadOnly: true},
		}},
	}}}
	paths := spec.protectedPaths([]string{"/host/w/agent.yaml"})
	for _, tt := range []struct {
		name   string
		stderr []string
		stdout []string
		want   []string
	}{
		{"git config", []string{"error: could not write config file /w/.git/config: Device or resource busy\n"}, nil, []string{".git/config"}},
		{"beneath, relative", []string{"sh: 1: cannot create ../.git/hooks/pre-commit: Read-only file system\n"}, nil, []string{".git/hooks"}},
		{"python, split", []string{"OSError: [Errno 30] Read-only file sys", "tem: '../.vscode/settings.json'"}, nil, []string{".vscode"}},
		{"go, lower case", []string{"open /w/.vscode/x: read-only file system\n"}, nil, []string{".vscode"}},
		{"a pinned directory moved", []string{"mv: cannot move '/w/.git' to '/w/.git-old': Device or resource busy\n"}, nil, []string{".git"}},
		{"beneath a pinned directory", []string{"error: /w/.git/objects/ab: Permission denied\n"}, nil, nil},
		{"a longer name", []string{"cannot open /w/.gitmodules: Permission denied\n", "/w/sub/.vscode: Permission denied\n"}, nil, nil},
		{"no refusal", []string{"fatal: /w/.git/config: No such file or directory\n"}, nil, nil},
		{"the refusal on another line", []string{"/w/.git/config\n", "Read-only file system\n"}, nil, nil},
		{"standard output", nil, []string{"/w/.git/config: Device or resource busy\n"}, nil},
		{"a guarded file", []string{"cannot create ../agent.yaml: Read-only file system\n"}, nil, nil},
		{"two, in order, each once", []string{"../.vscode/a: Read-only file system\n/w/.git/config: Device or resource busy\n../.vscode/b: Read-only file system\n"}, nil,
			[]string{".vscode", ".git/config"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &outputCap{marker: io.Discard, protected: protectedNames(paths, spec.Workdir)}
			errw, outw := c.writer(io.Discard, true), c.writer(io.Discard, false)
			for _, s := range tt.stderr {
				errw.Write([]byte(s))
			}
			for _, s := range tt.stdout {
				outw.Write([]byte(s))
			}
			if got := c.protectedSaid(); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// A line is read up to maxLine bytes, and past it the rest waits for the
// next newline.
func TestProtectedLongLine(t *testing.T) {
	paths := []protectedPath{{rel: ".git", view: "/w/.git", readOnly: true}}
	c := &outputCap{marker: io.Discard, protected: protectedNames(paths, "/w")}
	w := c.writer(io.Discard, true)
	long := make([]byte, 3*maxLine)
	for i := range long {
		long[i] = 'x'
	}
	w.Write(long)
	w.Write([]byte(" .git: Read-only file system\n"))
	if got := c.protectedSaid(); got != nil {
		t.Errorf("past maxLine: got %q", got)
	}
	w.Write([]byte("cannot create .git/x: Read-only file system\n"))
	if got := c.protectedSaid(); !slices.Equal(got, []string{".git"}) {
		t.Errorf("got %q, want .git", got)
	}
}
