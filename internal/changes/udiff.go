package changes

import (
	"fmt"
	"io"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// maxEdits bounds the edit distance the diff looks for (its memory grows
// as the square of it): beyond, the changed middle is shown as all old
// lines removed and all new ones added.
const maxEdits = 1000

// op is one line of an edit script: ' ' kept, '-' removed, '+' added.
type op struct {
	kind byte
	line string
}

// splitLines splits s after each line feed; the last line may lack one.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// edits is the edit script from a to b: the common start and end kept,
// the middle by Myers' algorithm (or replaced whole when it is too
// different).
func edits(a, b []string) []op {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var out []op
	for _, l := range a[:pre] {
		out = append(out, op{' ', l})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	if mid := myers(ma, mb); mid != nil {
		out = append(out, mid...)
	} else {
		for _, l := range ma {
			out = append(out, op{'-', l})
		}
		for _, l := range mb {
			out = append(out, op{'+', l})
		}
	}
	for _, l := range a[len(a)-suf:] {
		out = append(out, op{' ', l})
	}
	return out
}

// myers finds a shortest edit script from a to b, or nil when it is
// longer than maxEdits.
func myers(a, b []string) []op {
	n, m := len(a), len(b)
	limit := min(n+m, maxEdits)
	off := limit + 1
	v := make([]int, 2*limit+3)
	var trace [][]int // trace[d][k+d]: furthest x on diagonal k after d edits
	for d := 0; d <= limit; d++ {
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				trace = append(trace, append([]int(nil), v[off-d:off+d+1]...))
				return backtrack(a, b, trace)
			}
		}
		trace = append(trace, append([]int(nil), v[off-d:off+d+1]...))
	}
	return nil
}

// backtrack reads the edit script out of myers' trace.
func backtrack(a, b []string, trace [][]int) []op {
	x, y := len(a), len(b)
	var rev []op
	for d := len(trace) - 1; d > 0; d-- {
		prev := trace[d-1]
		at := func(k int) int { return prev[k+d-1] }
		k := x - y
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1 // a line of b added
		} else {
			pk = k - 1 // a line of a removed
		}
		px := at(pk)
		py := px - pk
		mx := px
		if pk == k-1 {
			mx = px + 1
		}
		for x > mx {
			x, y = x-1, y-1
			rev = append(rev, op{' ', a[x]})
		}
		if pk == k+1 {
			rev = append(rev, op{'+', b[py]})
		} else {
			rev = append(rev, op{'-', a[px]})
		}
		x, y = px, py
	}
	for x > 0 {
		x, y = x-1, y-1
		rev = append(rev, op{' ', a[x]})
	}
	out := make([]op, len(rev))
	for i, o := range rev {
		out[len(rev)-1-i] = o
	}
	return out
}

// unified writes the hunks of the diff from a to b with ctx lines of
// context, each line made safe for a terminal.
func unified(w io.Writer, a, b []string, ctx int) error {
	ops := edits(a, b)
	// oldAt and newAt: line numbers (from 0) before each op.
	oldAt, newAt := make([]int, len(ops)+1), make([]int, len(ops)+1)
	for i, o := range ops {
		oldAt[i+1], newAt[i+1] = oldAt[i], newAt[i]
		if o.kind != '+' {
			oldAt[i+1]++
		}
		if o.kind != '-' {
			newAt[i+1]++
		}
	}
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(0, i-ctx)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*ctx {
				end = min(end+ctx, run)
				break
			}
			end = run
		}
		if _, err := fmt.Fprintf(w, "@@ -%s +%s @@\n", span(oldAt[start], oldAt[end]), span(newAt[start], newAt[end])); err != nil {
			return err
		}
		for _, o := range ops[start:end] {
			line, nl := strings.CutSuffix(o.line, "\n")
			s := string(o.kind) + termsafe.Text(line) + "\n"
			if !nl {
				s += "\\ No newline at end of file\n"
			}
			if _, err := io.WriteString(w, s); err != nil {
				return err
			}
		}
		i = end
	}
	return nil
}

// span is a hunk's range of lines from..to (from 0, to excluded) as a
// unified diff writes it.
func span(from, to int) string {
	switch to - from {
	case 0:
		return fmt.Sprintf("%d,0", from)
	case 1:
		return fmt.Sprintf("%d", from+1)
	}
	return fmt.Sprintf("%d,%d", from+1, to-from)
}
