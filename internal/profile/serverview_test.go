package profile

import (
	"slices"
	"testing"
)

func TestServerWrites(t *testing.T) {
	const head = "version: 1\nagent: a\nservers:\n  fs:\n    command: [x]\n    profile: fs.yaml\ntools:\n  fs__read:\n    class: read\n    paths: [path]\n"
	for _, tt := range []struct {
		name, tools string
		want        []string // nil: unbounded
	}{
		{"reads only", "", []string{}},
		{"one dir", "  fs__write:\n    class: write\n    paths: [path]\n    constraints: ['args.path.within(\"notes/\") && size(args.content) < 10']\n", []string{"notes"}},
		{"two tools", "  fs__write:\n    class: write\n    paths: [path]\n    constraints: ['args.path.within(\"notes/\")']\n  fs__move:\n    class: write\n    paths: [src, dst]\n    constraints: ['args.src.within(\"a\") || args.src.within(\"/ws/b\")', 'args.dst.within(\"notes\")']\n", []string{"/ws/b", "a", "notes"}},
		{"an argument unbounded", "  fs__move:\n    class: write\n    paths: [src, dst]\n    constraints: ['args.src.within(\"a\")']\n", nil},
		{"no path argument", "  fs__exec:\n    class: write\n", nil},
		{"a disjunction with anything", "  fs__write:\n    class: write\n    paths: [path]\n    constraints: ['args.path.within(\"notes/\") || true']\n", nil},
		{"denied", "  fs__exec:\n    class: write\n    deny: true\n", []string{}},
	} {
		p, err := Parse("t.yaml", []byte(head+tt.tools))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		dirs, bounded := p.ServerWrites("fs")
		if bounded != (tt.want != nil) || bounded && !slices.Equal(dirs, tt.want) && !(len(dirs) == 0 && len(tt.want) == 0) {
			t.Errorf("%s: %v %v, want %v", tt.name, dirs, bounded, tt.want)
		}
	}
}
