package cel

import (
	"fmt"
	"slices"
	"testing"
)

func TestWithin(t *testing.T) {
	for _, tt := range []struct {
		src  string
		want []string // nil: unbounded
	}{
		{`args.path.within("notes/")`, []string{"notes/"}},
		{`args.path.within("notes/") && size(args.content) < 10`, []string{"notes/"}},
		{`size(args.content) < 10 && args.path.within("/ws/a")`, []string{"/ws/a"}},
		{`args.path.within("a/") || args.path.within("b/")`, []string{"a/", "b/"}},
		{`args.path.within("a/") || size(args.content) < 10`, nil},
		{`!args.path.within("a/")`, nil},
		{`args.path.within(".") && !args.path.within(".git/")`, []string{"."}},
		{`args.other.within("a/")`, nil},
		{`args.path.startsWith("/ws/notes/")`, nil},
		{`args.path.within(args.dir)`, nil},
		{`true ? args.path.within("a/") : true`, nil},
	} {
		p, err := Compile(tt.src)
		if err != nil {
			t.Fatalf("%s: %v", tt.src, err)
		}
		got, ok := p.Within("path")
		if ok != (tt.want != nil) || !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v %v, want %v", tt.src, got, ok, tt.want)
		}
	}
}

// ArgCalls finds args.ARG.FN("LIT") wherever it is written: under
// operators, conditions, lists, maps and macros; not a call whose
// argument is not a literal string, nor one on another receiver.
func TestArgCalls(t *testing.T) {
	p, err := Compile(`!args.a.startsWith("x") && (args.n > 1 ? [args.b.endsWith("y/")] : {"k": args.c.contains("z")})["k"] == true || args.l.exists(e, args.d.startsWith("w")) || args.e.startsWith(args.f) || "s".startsWith("t") || args.g.h.startsWith("u")`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range p.ArgCalls() {
		got = append(got, fmt.Sprintf("%s.%s(%s)@%d", c.Arg, c.Fn, c.Lit, c.Col))
	}
	want := []string{"a.startsWith(x)@9", "b.endsWith(y/)@50", "c.contains(z)@81", "d.startsWith(w)@137"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ArgCalls: %v, want %v", got, want)
	}
}
