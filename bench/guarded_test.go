package main

import (
	"testing"
	"time"
)

func TestSpliceSection(t *testing.T) {
	const h = "### Guarded workspace against direct"
	sec := h + "\n\nnew table\n"
	for _, c := range []struct{ name, doc, want string }{
		{
			"replaced in place",
			"# B\n\n### A\n\na\n\n" + h + "\n\nold table\n\n### Goals\n\ng\n",
			"# B\n\n### A\n\na\n\n" + sec + "\n### Goals\n\ng\n",
		},
		{
			"replaced at the end",
			"# B\n\n" + h + "\n\nold\n",
			"# B\n\n" + sec + "\n",
		},
		{
			"up to a higher heading",
			"# B\n\n" + h + "\n\nold\n\n## Next\n",
			"# B\n\n" + sec + "\n## Next\n",
		},
		{
			"inserted before the goals",
			"# B\n\n### A\n\na\n\n### Goals\n\ng\n",
			"# B\n\n### A\n\na\n\n" + sec + "\n### Goals\n\ng\n",
		},
		{
			"appended",
			"# B\n\n### A\n\na\n",
			"# B\n\n### A\n\na\n\n" + sec + "\n",
		},
		{
			"a longer heading is another section",
			"# B\n\n" + h + " (old)\n\nx\n",
			"# B\n\n" + h + " (old)\n\nx\n\n" + sec + "\n",
		},
	} {
		if got := spliceSection(c.doc, h, sec, "### Goals"); got != c.want {
			t.Errorf("%s:\n%q\nwant\n%q", c.name, got, c.want)
		}
	}
}

func TestMarks(t *testing.T) {
	start, end, ok := marks("npm warn x\ncordon-bench-start 1000000000\nmore\ncordon-bench-end 3500000000\ncordon: note\n")
	if !ok || end.Sub(start) != 2500*time.Millisecond {
		t.Errorf("marks = %v, %v, %v", start, end, ok)
	}
	if _, _, ok := marks("cordon-bench-start 1\n"); ok {
		t.Error("marks found an end that is not there")
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{7: "7", 999: "999", 1000: "1,000", 10000: "10,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
