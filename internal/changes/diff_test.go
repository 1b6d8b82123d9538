//go:build linux

package changes

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	root(t)
	e := newEnv(t)
	write(t, e.host+"/mod.txt", "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n", 0o644)
	write(t, e.host+"/run.sh", "echo\n", 0o644)
	write(t, e.host+"/gone.txt", "bye\n", 0o644)
	write(t, e.host+"/img", "\x00\x01", 0o644)
	must(t, os.Symlink("old", e.host+"/l"))
	e.start()
	write(t, e.upper+"/mod.txt", "one\ntwo\nTHREE\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven", 0o644)
	write(t, e.upper+"/run.sh", "echo\n", 0o755)
	whiteoutAt(t, e.upper+"/gone.txt")
	write(t, e.upper+"/img", "\x00\x02", 0o644)
	must(t, os.Symlink("new", e.upper+"/l"))
	write(t, e.upper+"/esc\x1b]0;title\a", "red \x1b[31m text\n", 0o644)
	s := e.mustCapture(t)
	var b bytes.Buffer
	must(t, Diff(&b, s, e.state, nil))
	want := `diff --git a/esc\x1b]0;title\a b/esc\x1b]0;title\a
new file mode 100644
--- /dev/null
+++ b/esc\x1b]0;title\a
@@ -0,0 +1 @@
+red \x1b[31m text
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/img b/img
Binary files a/img and b/img differ
diff --git a/l b/l
--- a/l
+++ b/l
@@ -1 +1 @@
-old
\ No newline at end of file
+new
\ No newline at end of file
diff --git a/mod.txt b/mod.txt
--- a/mod.txt
+++ b/mod.txt
@@ -1,6 +1,6 @@
 one
 two
-three
+THREE
 four
 five
 six
@@ -8,3 +8,4 @@
 eight
 nine
 ten
+eleven
\ No newline at end of file
diff --git a/run.sh b/run.sh
old mode 100644
new mode 100755
`
	if b.String() != want {
		t.Errorf("diff:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	must(t, Diff(&b, s, e.state, []string{"run.sh"}))
	if !strings.HasPrefix(b.String(), "diff --git a/run.sh") || strings.Count(b.String(), "diff --git") != 1 {
		t.Errorf("diff of run.sh:\n%s", b.String())
	}
	// The host's file is read without following a link planted since.
	must(t, os.Remove(e.host+"/mod.txt"))
	must(t, os.Symlink("/etc/passwd", e.host+"/mod.txt"))
	b.Reset()
	must(t, Diff(&b, s, e.state, []string{"mod.txt"}))
	if contains(&b, "root:") || !contains(&b, "cannot be read now") {
		t.Errorf("diff through a planted link:\n%s", b.String())
	}
}

// The edit script turns a into b, and is as short as the longest common
// subsequence allows.
func TestEdits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	gen := func() []string {
		out := make([]string, r.IntN(30))
		for i := range out {
			out[i] = string(rune('a' + r.IntN(4)))
		}
		return out
	}
	for range 2000 {
		a, b := gen(), gen()
		ops := edits(a, b)
		var ga, gb []string
		edits := 0
		for _, o := range ops {
			if o.kind != '+' {
				ga = append(ga, o.line)
			}
			if o.kind != '-' {
				gb = append(gb, o.line)
			}
			if o.kind != ' ' {
				edits++
			}
		}
		if strings.Join(ga, "") != strings.Join(a, "") || strings.Join(gb, "") != strings.Join(b, "") {
			t.Fatalf("%q -> %q: script %v", a, b, ops)
		}
		if want := len(a) + len(b) - 2*lcs(a, b); edits != want {
			t.Fatalf("%q -> %q: %d edits, want %d", a, b, edits, want)
		}
	}
	// Too different: whole replacement, still right.
	var a, b []string
	for i := range 3000 {
		a = append(a, string(rune('a'+i%7))+"\n")
		b = append(b, string(rune('a'+i%5))+"\n")
	}
	var out bytes.Buffer
	must(t, unified(&out, a, b, 3))
	if !strings.HasPrefix(out.String(), "@@ -") {
		t.Errorf("no hunk: %.100s", out.String())
	}
}

func lcs(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}
