package cli

import (
	"bytes"
	"strings"
	"testing"
)

// A tool server's stderr is shown as cordon's lines: escape sequences and
// carriage returns the server wrote are escaped, each line keeps its prefix.
func TestPrefixWriterEscapes(t *testing.T) {
	var b bytes.Buffer
	w := prefixWriter{w: &b, prefix: "cordon: server s: "}
	w.Write([]byte("ok\n\x1b]0;owned\x07\x1b[2Jwiped\rcordon: forged\n"))
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07\r") {
		t.Fatalf("control characters reached the terminal: %q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 || lines[0] != "cordon: server s: ok" || !strings.HasPrefix(lines[1], `cordon: server s: \x1b]0;owned\a\x1b[2Jwiped\rcordon: forged`) {
		t.Fatalf("lines: %q", lines)
	}
}
