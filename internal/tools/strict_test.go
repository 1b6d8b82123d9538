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
		{`{"path":"README.md","Path":".env"}`, `fields "path" and "Path" differ only in case`},
		{`{"path":"notes/ok.md","PATH":"pwned.sh","content":"x"}`, `fields "path" and "PATH" differ only in case`},
		{`{"url":"https://example.invalid/","URL":"http://169.254.169.254/"}`, `fields "url" and "URL" differ only in case`},
		{`{"path":"a","path":"b"}`, `field "path" given twice`},
		{`{"path":"a","max_bytes":1,"Max_Bytes":2}`, `fields "max_bytes" and "Max_Bytes" differ only in case`},
		{`{"path":"a","extra":1}`, `unknown field "extra"`},
		// Unicode's case folds too: the Kelvin sign is a K, the long s an s.
		{`{"path":"a","opts":{"kind":"safe","\u212aind":"evil"}}`, `differ only in case`},
		{`{"path":"a","opts":[{"ſeed":1,"seed":2}]}`, `differ only in case`},
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
		`{"argv":["git","status"],"ARGV":["sh","-c","id"]}`: `fields "argv" and "ARGV" differ only in case`,
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
		if code := Main(name, nil, strings.NewReader(`{"path":"x","Path":"y","url":"u"}`), &out); code != 2 || !strings.Contains(out.String(), `differ only in case`) {
			t.Errorf("%s: exit %d, %s", name, code, out.String())
		}
	}
}

// Each built-in tool decodes only the fields it declares: another tool's
// field, a case variant or a key given twice is refused, for every tool.
func TestDecodePerTool(t *testing.T) {
	for _, tt := range []struct {
		tool, in, err string
	}{
		{"read_file", `{"path":"a","max_bytes":3}`, ""},
		{"read_file", `{"path":"a","content":"x"}`, `unknown field "content"`},
		{"read_file", `{"path":"README.md","Path":".env"}`, `fields "path" and "Path" differ only in case`},
		{"read_file", `{"path":"README.md","path":".env"}`, `field "path" given twice`},
		{"write_file", `{"path":"notes/a","content":"x","append":true}`, ""},
		{"write_file", `{"path":"notes/ok.md","PATH":"pwned.sh","content":"x"}`, `fields "path" and "PATH" differ only in case`},
		{"write_file", `{"path":"notes/ok.md","content":"x","url":"u"}`, `unknown field "url"`},
		{"write_file", `{"path":"notes/ok.md","content":"x","content":"y"}`, `given twice`},
		{"list_files", `{"path":"."}`, ""},
		{"list_files", `{"path":".","Path":"/"}`, `fields "path" and "Path" differ only in case`},
		{"list_files", `{"path":".","max_bytes":1}`, `unknown field "max_bytes"`},
		{"fetch", `{"url":"https://example.invalid/","method":"GET"}`, ""},
		{"fetch", `{"url":"https://example.invalid/","Url":"http://169.254.169.254/"}`, `fields "url" and "Url" differ only in case`},
		{"fetch", `{"url":"https://example.invalid/","path":"x"}`, `unknown field "path"`},
		{"fetch", `{"url":"a","url":"b"}`, `given twice`},
	} {
		_, err := Decode(tt.tool, []byte(tt.in))
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s %s: got %v, want %q", tt.tool, tt.in, err, tt.err)
		}
	}
}
