package gateway

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestIDFinder(t *testing.T) {
	for _, c := range []struct{ msg, want string }{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"id":99}}`, `7`},
		{`{"method":"tools/call","params":{"arguments":{"id":"x","s":"\"id\":5"}},"jsonrpc":"2.0","id":"a\"b"}`, `"a\"b"`},
		{`{"params":{"id":3},"id" : -12 }`, `-12`},
		{`{"params":{"id":3}}`, ``},
		{`{"id":{"x":1}}`, ``},
		{`{"id":null}`, ``},
		{`[{"id":4}]`, ``},
	} {
		var f idFinder
		for i := 0; i < len(c.msg); i++ {
			f.feed(c.msg[i])
		}
		if got := string(f.value()); got != c.want {
			t.Errorf("%s: id %q, want %q", c.msg, got, c.want)
		}
	}
}

// The cut text's JSON form fits the size asked, and is as long as can be.
func TestCutJSONText(t *testing.T) {
	for _, s := range []string{"plain ascii text", "quotes \" and \\ and \n new<lines>&", "ünïcödé ✓ 🎉", "bad \xff utf8 \x01 ctl"} {
		full, _ := json.Marshal(strings.ToValidUTF8(s, "\uFFFD"))
		for n := 2; n <= len(full)+2; n++ {
			got := cutJSONText(s, n)
			b, _ := json.Marshal(got)
			if len(b) > n || !strings.HasPrefix(strings.ToValidUTF8(s, "\uFFFD"), got) {
				t.Fatalf("%q cut to %d: %q (%d bytes as JSON)", s, n, got, len(b))
			}
			if n >= len(full)+3*strings.Count(s, "\xff") && len(b) != len(full) {
				t.Fatalf("%q cut to %d, more than its %d bytes: %q", s, n, len(full), got)
			}
		}
	}
}
