package cel

import (
	"strings"
	"testing"
)

// Path methods read a path as a file: within() is by whole names (notes
// does not hold notes-evil), relative names are taken from the workspace,
// and a relative path with no workspace is an error, never true.
func TestPathMethods(t *testing.T) {
	ws := "/work/app"
	for _, tt := range []struct {
		src, path string
		want      any
	}{
		{`args.path.within("notes/")`, "/work/app/notes/a.md", true},
		{`args.path.within("notes")`, "/work/app/notes", true},
		{`args.path.within("notes/")`, "/work/app/notes-evil/a.md", false},
		{`args.path.within("notes/")`, "/work/app/README.md", false},
		{`args.path.within("notes/")`, "notes/../README.md", false},
		{`args.path.within("/work/app")`, "/work/app/x", true},
		{`args.path.within("/work/app")`, "/work/application", false},
		{`args.path.glob("**/.env*")`, "/work/app/deploy/.env.production", true},
		{`args.path.glob("notes/*.md")`, "/work/app/notes/a.md", true},
		{`args.path.glob("notes/*.md")`, "/work/app/notes/a.sh", false},
		{`args.path.base()`, "/work/app/notes/a.md", "a.md"},
		{`args.path.ext()`, "/work/app/notes/a.md", ".md"},
		{`args.path.ext()`, "/work/app/.env", ".env"},
		{`args.path.dir()`, "/work/app/notes/a.md", "/work/app/notes"},
		{`args.path.base() == "a.md" && args.path.within("notes/")`, "notes/a.md", true},
	} {
		prog, err := Compile(tt.src)
		if err != nil {
			t.Fatalf("%s: %v", tt.src, err)
		}
		got, err := eval(prog.root, scope{name: "args", val: map[string]any{"path": tt.path}, ws: ws})
		if err != nil || got != tt.want {
			t.Errorf("%s on %s: got %v %v, want %v", tt.src, tt.path, got, err, tt.want)
		}
		if b, ok := tt.want.(bool); ok {
			if err := prog.CheckIn(map[string]any{"path": tt.path}, ws); (err == nil) != b {
				t.Errorf("CheckIn %s on %s: %v", tt.src, tt.path, err)
			}
		}
	}
	prog, _ := Compile(`args.path.within("notes/")`)
	if err := prog.CheckIn(map[string]any{"path": "/work/app/notes/a"}, ""); err == nil || IsFalse(err) || !strings.Contains(err.Error(), "no workspace") {
		t.Errorf("no workspace: %v", err)
	}
	if err := prog.Check(map[string]any{"path": 3}); err == nil || IsFalse(err) {
		t.Errorf("a number as a path: %v", err)
	}
	for src, want := range map[string]string{
		`args.path.within()`:       "takes 1 arguments",
		`args.path.base("x")`:      "takes 0 arguments",
		`args.path.glob("a**")`:    "whole names",
		`args.path.glob("a/../b")`: "not a clean",
		`args.path.glob(1)`:        "takes a string",
	} {
		if _, err := Compile(src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", src, err, want)
		}
	}
}
