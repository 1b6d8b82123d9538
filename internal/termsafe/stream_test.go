package termsafe

import (
	"fmt"
	"strings"
	"testing"
)

// A line of cordon's never continues one the sandbox left open, and never
// gains an empty line before it when the sandbox ended its own.
func TestStreamOwnLines(t *testing.T) {
	for _, tt := range []struct{ sandbox, want string }{
		{`{"status":"ok"}`, "{\"status\":\"ok\"}\n{\"status\":\"drift\"}\n"},
		{"done\n", "done\n{\"status\":\"drift\"}\n"},
		{"", "{\"status\":\"drift\"}\n"},
	} {
		var b strings.Builder
		s := NewStream(&b)
		fmt.Fprint(s, tt.sandbox)
		fmt.Fprintln(s.Own(), `{"status":"drift"}`)
		if b.String() != tt.want {
			t.Errorf("after %q: got %q, want %q", tt.sandbox, b.String(), tt.want)
		}
	}
}
