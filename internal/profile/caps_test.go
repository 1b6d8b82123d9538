package profile

import (
	"errors"
	"strings"
	"testing"
)

func TestCaps(t *testing.T) {
	const minimal = "version: 1\nagent: a\n"
	p, err := Parse("p.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if p.ArgumentCap() != 1<<20 || p.ResultCap() != 4<<20 {
		t.Errorf("defaults: arguments %d, results %d; want 1MiB and 4MiB", p.ArgumentCap(), p.ResultCap())
	}
	p, err = Parse("p.yaml", []byte(minimal+"session:\n  max_argument_bytes: 64KiB\n  max_result_bytes: 2MiB\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.ArgumentCap() != 64<<10 || p.ResultCap() != 2<<20 {
		t.Errorf("set: arguments %d, results %d; want 64KiB and 2MiB", p.ArgumentCap(), p.ResultCap())
	}
	for _, tt := range []struct {
		src, field, msg string
		line, col       int
	}{
		{"session:\n  max_argument_bytes: lots\n", "session.max_argument_bytes", "not a size", 4, 23},
		{"session:\n  max_result_bytes: 10\n", "session.max_result_bytes", "below the smallest bound, 1KiB", 4, 21},
		{"session:\n  max_argument_bytes: 1GiB\n", "session.max_argument_bytes", "above the largest bound, 64MiB", 4, 23},
		{"session:\n  max_result_bytes: -1MiB\n", "session.max_result_bytes", "negative", 4, 21},
	} {
		_, err := Parse("p.yaml", []byte(minimal+tt.src))
		var errs Errors
		if !errors.As(err, &errs) || len(errs) == 0 {
			t.Errorf("%q: got %v, want a profile error", tt.src, err)
			continue
		}
		e := errs[0]
		if e.Field != tt.field || e.Line != tt.line || e.Col != tt.col || !strings.Contains(e.Msg, tt.msg) {
			t.Errorf("%q: got %q (line %d col %d field %s), want line %d col %d field %s with %q", tt.src, e.Error(), e.Line, e.Col, e.Field, tt.line, tt.col, tt.field, tt.msg)
		}
	}
}
