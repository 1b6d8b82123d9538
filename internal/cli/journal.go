package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/journal"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// journalDir is where cordon writes what its sandboxes make on the host
// before making it (see package journal): in its state directory, or,
// where that cannot be made (a home that is not the user's to write) or a
// sandbox of p could see it, in a directory of the user's own in the
// runtime directory or /tmp; "" when neither will do.
func journalDir(e *env, p *profile.Profile) string {
	if dirs := journalDirs(e, p); len(dirs) > 0 {
		return dirs[0]
	}
	return ""
}

// journalDirs lists the places journalDir may choose, the one it chooses
// first: a sweep looks in each.
func journalDirs(e *env, p *profile.Profile) []string {
	var out []string
	if d := cacheDir(e, p, "journal"); d != "" {
		out = append(out, d)
	}
	if d := runtimeJournal(e); d != "" && visibleIn(e, p, e.cwd, filepath.Join(d, "entry")) == "" {
		out = append(out, d)
	}
	return out
}

// runtimeJournal is the journal directory outside cordon's state:
// $XDG_RUNTIME_DIR/cordon/journal, $TMPDIR/cordon-UID/journal or
// /tmp/cordon-UID/journal, the first that will do; its first
// directory of cordon's in it must be the user's own, a directory, and
// closed to everyone else (another user could have made it first); ""
// when neither is.
func runtimeJournal(e *env) string {
	var bases []string
	if d, ok := e.getenv("XDG_RUNTIME_DIR"); ok && filepath.IsAbs(d) {
		bases = append(bases, filepath.Join(d, "cordon"))
	}
	for _, tmp := range []string{os.TempDir(), "/tmp"} {
		bases = append(bases, filepath.Join(tmp, fmt.Sprintf("cordon-%d", os.Geteuid())))
	}
	for _, base := range bases {
		os.Mkdir(base, 0o700)
		var st unix.Stat_t
		if unix.Lstat(base, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 {
			continue
		}
		dir := filepath.Join(base, "journal")
		if err := os.Mkdir(dir, 0o700); err == nil || os.IsExist(err) {
			return dir
		}
	}
	return ""
}

// sweepWait is how long a sweep waits for what a killed cordon left
// running in its cgroups to end; what is still there is left for the next.
const sweepWait = 2 * time.Second

// sweepJournal removes what cordons killed before this one left in dirs
// (their sandboxes' cgroups and placeholders), saying so on stderr.
func sweepJournal(e *env, dirs ...string) {
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		left, err := journal.Sweep(dir, time.Now().Add(sweepWait))
		for _, l := range left {
			fmt.Fprintf(e.stderr, "cordon: removed what a cordon killed earlier left: %s\n", termsafe.Line(l.String()))
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "cordon: warning: %s\n", termsafe.Line(err.Error()))
		}
	}
}
