package cel

import (
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
