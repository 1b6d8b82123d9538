package gateway

import "testing"

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
