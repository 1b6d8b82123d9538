package tools

import (
	"bytes"
	"strings"
	"testing"
)

// What a policy read (args.path, args.argv) is what the tool gets: a field
// in another case, a field given twice, or one the tool does not declare is
// refused, for every built-in tool and the run tool's argv.
func TestDecodeStrict(t *testing.T) {
	for _, tt := range []struct {
		in, err string
	}{
		{`{"path":"README.md"}`, ""},
		{`{"path":"README.md","Path":".env"}`, `unknown field "Path"`},
		{`{"path":"notes/ok.md","PATH":"pwned.sh","content":"x"}`, `unknown field "PATH"`},
		{`{"url":"https://example.invalid/","URL":"http://169.254.169.254/"}`, `unknown field "URL"`},
		{`{"path":"a","path":"b"}`, `field "path" given twice`},
		{`{"path":"a","max_bytes":1,"Max_Bytes":2}`, `unknown field "Max_Bytes"`},
		{`{"path":"a","extra":1}`, `unknown field "extra"`},
		{`{"path":"a"} {"path":"b"}`, "after top-level value"},
	} {
		var a Args
		err := DecodeStrict([]byte(tt.in), &a)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.in, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: got %v, want %q", tt.in, err, tt.err)
		}
	}
	var run struct {
		Argv []string `json:"argv"`
	}
	for in, want := range map[string]string{
		`{"argv":["git","status"],"ARGV":["sh","-c","id"]}`: `unknown field "ARGV"`,
		`{"argv":["git","status"],"argv":["sh"]}`:           `field "argv" given twice`,
		`{"argv":[{"a":1,"a":2}]}`:                          `field "a" given twice`,
		// Nesting without end is refused, not followed down the stack.
		`{"argv":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`: "exceeded max depth",
	} {
		if err := DecodeStrict([]byte(in), &run); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", in, err, want)
		}
	}
}

// The tool itself refuses such arguments, before it touches anything.
func TestMainRefusesCaseVariants(t *testing.T) {
	for _, name := range Names {
		var out bytes.Buffer
		if code := Main(name, strings.NewReader(`{"path":"x","Path":"y","url":"u"}`), &out); code != 2 || !strings.Contains(out.String(), `unknown field \"Path\"`) {
			t.Errorf("%s: exit %d, %s", name, code, out.String())
		}
	}
}
