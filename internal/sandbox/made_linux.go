package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
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
		if !m.Writable || m.Device || m.Review {
			continue
		}
		index := ""
		if opts.WalkIndex != "" {
			sum := sha256.Sum256([]byte(m.Source))
			index = filepath.Join(opts.WalkIndex, hex.EncodeToString(sum[:16]))
		}
		found, complete, err := protect.FindMade(m.Source, begun.Add(-madeMargin), m.Protect, index)
		if err != nil {
			continue // not a directory, or gone
		}
		if !complete {
			res.Notes = append(res.Notes, fmt.Sprintf("%s is too large to look at in full after the run for files the host's tools obey (git, hg, package managers, editors): what was looked at is listed", m.Source))
		}
		for _, f := range found {
			abs := filepath.Join(m.Source, f.Rel)
			o := outcome.Obeyed{Path: abs, Tool: f.Tool, Created: f.Created}
			if f.Created {
				o.Remove = "rm -rf -- " + shellQuote(abs)
			}
			res.obeyed = append(res.obeyed, o)
		}
	}
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
