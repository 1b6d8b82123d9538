package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/protect"
)

// madeMargin is how far before the sandbox started a change still counts
// as the run's: file systems stamp times from a coarse clock, a tick (up
// to 10 ms) behind the one cordon reads.
const madeMargin = 50 * time.Millisecond

// findMade looks, once the run has ended and its placeholders are gone, in
// every writable bind of direct mode for what the host's tools obey that
// the run made or changed below what the plan could hold (see
// protect.FindMade), and reports it in the outcome, with the command that
// removes what the run made.
func findMade(spec *Spec, opts Options, begun time.Time, res *Result) {
	for _, m := range spec.Mounts {
		if !m.Writable || m.Device || m.Review || slices.Contains(spec.caches, m.Target) {
			continue // the agent's caches: no host tool reads them
		}
		if to, err := protect.MoveRootHead(m.Source, begun.Add(-madeMargin)); err != nil {
			res.Notes = append(res.Notes, err.Error())
		} else if to != "" {
			res.obeyed = append(res.obeyed, outcome.Obeyed{Path: filepath.Join(m.Source, "HEAD"), Tool: "git", Created: true, MovedTo: filepath.Join(m.Source, to)})
		}
		found, complete, err := protect.FindMade(m.Source, begun.Add(-madeMargin), m.Protect, walkIndex(opts, m.Source))
		if err != nil {
			continue // not a directory, or gone
		}
		if !complete && !slices.ContainsFunc(found, func(f protect.Made) bool { return f.Unreadable }) {
			res.obeyedUnchecked = fmt.Sprintf("cordon did not look at all of %s after the run for files the host's tools obey (past %d entries, %d levels or %d findings): what it found is listed; look at the rest before a host tool runs there", m.Source, protect.MaxMadeEntries, protect.MaxMadeDepth, protect.MaxMadeListed)
		}
		for _, f := range found {
			abs := filepath.Join(m.Source, f.Rel)
			o := outcome.Obeyed{Path: abs, Tool: f.Tool, Created: f.Created, Unreadable: f.Unreadable}
			if f.Created {
				o.Remove = "rm -rf -- " + shellQuote(abs)
			}
			res.obeyed = append(res.obeyed, o)
		}
	}
}

// walkIndex is the file of opts.WalkIndex that keeps what the looks in
// the tree at source learned of it, "" for none.
func walkIndex(opts Options, source string) string {
	if opts.WalkIndex == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(source))
	return filepath.Join(opts.WalkIndex, hex.EncodeToString(sum[:16]))
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
