package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// Fed in pieces cut anywhere, utf8Check agrees with utf8.Valid on the
// whole.
func TestUTF8CheckInPieces(t *testing.T) {
	for _, s := range []string{"", "plain", "h\u00e9llo \u20ac \U0001F600", "\xff", "abc\xe2\x82", "\xe2\x82abc", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "a\xf0\x9f\x98"} {
		for cut1 := 0; cut1 <= len(s); cut1++ {
			for cut2 := cut1; cut2 <= len(s); cut2++ {
				var v utf8Check
				v.feed([]byte(s[:cut1]))
				v.feed([]byte(s[cut1:cut2]))
				v.feed([]byte(s[cut2:]))
				if v.valid() != utf8.ValidString(s) {
					t.Errorf("%q cut at %d and %d: valid %v, want %v", s, cut1, cut2, v.valid(), utf8.ValidString(s))
				}
			}
		}
	}
	for s, want := range map[string]int{"": 0, "a": 0, "\xc3": 1, "a\xe2\x82": 2, "\xf0\x9f\x98": 3, "\xe2\x82\xac": 0, "\xff": 0, "\x80\x80\x80": 0} {
		if got := incompleteTail([]byte(s)); got != want {
			t.Errorf("incompleteTail(%q) = %d, want %d", s, got, want)
		}
	}
}

// textRun writes its arguments' output in pieces that cut characters:
// "text" writes UTF-8 text with quotes and control characters to stdout
// and bytes that are not UTF-8 to stderr; "euros N" writes N euro signs
// (3 bytes each, so that memory and spool split one); "cut" ends its
// stdout inside a character.
func textRun(ctx context.Context, e sandbox.ExecOptions) (outcome.Outcome, error) {
	switch e.Args[0] {
	case "text":
		for _, p := range []string{"h\xc3", "\xa9llo \xe2\x82", "\xac \"q\" \\ \x01\t\n", "\xf0\x9f", "\x98\x80\n"} {
			e.Stdout.Write([]byte(p))
		}
		e.Stderr.Write([]byte("bad \xff\xfe\n"))
	case "euros":
		n := 0
		for _, c := range e.Args[1] {
			n = n*10 + int(c-'0')
		}
		e.Stdout.Write([]byte(strings.Repeat("\u20ac", n)))
	case "cut":
		e.Stdout.Write([]byte("abc\xe2\x82"))
	}
	return okOutcome(), nil
}

const textOut = "h\u00e9llo \u20ac \"q\" \\ \x01\t\n\U0001F600\n"

// A command's output comes as text beside its base64 when it is UTF-8:
// whole in a buffered answer, from memory and spool alike, and piece by
// piece in a stream, no piece ending inside a character.
func TestExecOutputAsText(t *testing.T) {
	f, _ := newCmdFixture(t, nil, Commands{}, textRun)
	ctx := context.Background()
	a := f.client("alice-a")
	sb, err := a.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"text"}})
	if err != nil || string(res.Stdout) != textOut || res.StdoutText == nil || *res.StdoutText != textOut || res.StderrText != nil || string(res.Stderr) != "bad \xff\xfe\n" {
		t.Fatalf("buffered: %q %v %q %v, want the text %q and no stderr_text", res.Stdout, res.StdoutText, res.Stderr, err, textOut)
	}
	n := spoolMem // 3n bytes: past memory, a character split between memory and spool
	res, err = a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"euros", "65536"}})
	want := strings.Repeat("\u20ac", n)
	if err != nil || res.StdoutText == nil || *res.StdoutText != want || string(res.Stdout) != want || res.StderrText == nil || *res.StderrText != "" {
		t.Fatalf("buffered from the spool: %d bytes, text %v, %v", len(res.Stdout), res.StdoutText != nil, err)
	}
	res, err = a.Run(ctx, sb.ID, api.ExecRequest{Args: []string{"cut"}})
	if err != nil || res.StdoutText != nil || string(res.Stdout) != "abc\xe2\x82" {
		t.Fatalf("output ending inside a character: %q %v %v", res.Stdout, res.StdoutText, err)
	}

	stream := func(args string) []map[string]any {
		t.Helper()
		resp := f.post(ctx, t, "alice-a", "POST", "/v1/sandboxes/"+sb.ID+"/exec", `{"args":[`+args+`],"stream":true}`)
		defer resp.Body.Close()
		var evs []map[string]any
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var ev map[string]any
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("line %q: %v", sc.Bytes(), err)
			}
			evs = append(evs, ev)
		}
		return evs
	}
	var out, errb bytes.Buffer
	var text strings.Builder
	for _, ev := range stream(`"text"`) {
		var e api.ExecEvent
		b, _ := json.Marshal(ev)
		json.Unmarshal(b, &e)
		out.Write(e.Stdout)
		errb.Write(e.Stderr)
		text.WriteString(e.StdoutText)
		if len(e.Stdout) > 0 && e.StdoutText != string(e.Stdout) {
			t.Errorf("a piece of stdout %q has the text %q", e.Stdout, e.StdoutText)
		}
		if _, ok := ev["stderr_text"]; ok {
			t.Errorf("stderr that is not UTF-8 came with a text: %v", ev)
		}
	}
	if out.String() != textOut || text.String() != textOut || errb.String() != "bad \xff\xfe\n" {
		t.Errorf("streamed: %q, text %q, stderr %q", out.String(), text.String(), errb.String())
	}
	// Held back, the start of a character comes before the outcome, as
	// bytes.
	evs := stream(`"cut"`)
	out.Reset()
	for i, ev := range evs {
		var e api.ExecEvent
		b, _ := json.Marshal(ev)
		json.Unmarshal(b, &e)
		out.Write(e.Stdout)
		if (e.Outcome != nil) != (i == len(evs)-1) {
			t.Errorf("event %d of %d: %v", i, len(evs), ev)
		}
	}
	if out.String() != "abc\xe2\x82" || len(evs) != 3 || evs[0]["stdout_text"] != "abc" || evs[1]["stdout_text"] != nil {
		t.Errorf("streamed output ending inside a character: %q in %v", out.String(), evs)
	}
}
