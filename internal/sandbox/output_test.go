package sandbox

import (
	"io"
	"slices"
	"testing"
)

// The limit phrases are found on standard error where they end a message,
// also split across writes, and not in a source comment or on standard
// output; every one seen is kept, in order.
func TestOutputPhrases(t *testing.T) {
	for _, tt := range []struct {
		name   string
		stderr []string
		stdout []string
		want   []string
	}{
		{"a write error", []string{"head: error writing 'big': File too large\n"}, nil, []string{"File too large"}},
		{"python", []string{"OSError: [Errno 27] File too large: 'big'\n"}, nil, []string{"File too large"}},
		{"bash", []string{"bash: line 1: 11 File size li", "mit exceededhead -c 3M > big\n"}, nil, []string{"File size limit exceeded"}},
		{"split at its end", []string{"File size li", "mit exceeded\n"}, nil, []string{"File size limit exceeded"}},
		{"at the end of a write", []string{"MemoryError"}, nil, []string{"MemoryError"}},
		{"a comment", []string{"#define EFBIG 27 /* File too large */\n"}, nil, nil},
		{"standard output", nil, []string{"File too large\n"}, nil},
		{"two, in order", []string{"Cannot allocate memory\n", "File size limit exceeded\n", "Cannot allocate memory\n"}, nil,
			[]string{"Cannot allocate memory", "File size limit exceeded"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &outputCap{marker: io.Discard}
			errw, outw := c.writer(io.Discard, true), c.writer(io.Discard, false)
			for _, s := range tt.stderr {
				errw.Write([]byte(s))
			}
			for _, s := range tt.stdout {
				outw.Write([]byte(s))
			}
			if got := c.saidLimits(); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
