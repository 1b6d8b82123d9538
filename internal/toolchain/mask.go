package toolchain

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/protect"
)

// Bounds of the search of a prefix for credentials. A Go root (17,000
// names) is read in about 25 ms, a rustup toolchain (54,000) in 50 ms, a
// pyenv version (55,000, in many small directories) in 100 ms. A prefix
// past either bound is not bound at all: what was not read may hold a
// token. Variables for tests.
var (
	maxPrefixEntries = 200_000
	maxPrefixDepth   = 64
)

// credentialsIn searches the install prefix for credentials (package
// protect's catalog: an npmrc, a pip.conf, a .netrc, a .ssh directory, at
// any depth) and returns the paths, relative to prefix, that the sandbox
// must see masked: each one found; for a symbolic link of such a name,
// what it leads to when that lies inside the prefix (a link cannot be
// masked itself, and what it leads to outside the prefix this bind does
// not show); for a file with other names (hard links), those too. An
// error says why prefix cannot be searched whole, and so is not bound.
//
// cache, when set, is a directory where the search keeps what it found of
// each prefix, until a directory of the prefix changes (see
// protect.Search.InCached).
func credentialsIn(prefix, cache string) ([]string, error) {
	file := ""
	if cache != "" {
		sum := sha256.Sum256([]byte(prefix))
		file = filepath.Join(cache, hex.EncodeToString(sum[:16]))
	}
	found, err := protect.Search{MaxEntries: maxPrefixEntries, MaxDepth: maxPrefixDepth, SameFiles: true}.InCached(prefix, file)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range found {
		if !f.Link {
			out = append(out, f.Rel)
			continue
		}
		target, err := filepath.EvalSymlinks(filepath.Join(real, f.Rel))
		if err != nil {
			continue // leads nowhere
		}
		if rel, err := filepath.Rel(real, target); err == nil && within(target, real) {
			if rel == "." {
				return nil, fmt.Errorf("%s is a link to the prefix itself, named as credentials", f.Rel)
			}
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	// A directory masked hides what is below it.
	return slices.DeleteFunc(out, func(p string) bool {
		return slices.ContainsFunc(out, func(d string) bool { return d != p && within(p, d) })
	}), nil
}

// maskCredentials searches the prefix of each entry that binds one for
// credentials, records what its bind masks, warns once of each prefix
// that holds any, and drops the entries whose
// prefix cannot be searched whole: a name the profile lists, or the
// command, is then an error; a name a script gives is left out with a
// warning.
func (r *resolver) maskCredentials(pl *Plan, fromScript map[string]bool) error {
	searched := map[string]error{}
	told := map[string]bool{}
	pl.masks = map[string][]string{}
	kept := pl.Entries[:0]
	for _, e := range pl.Entries {
		if e.Bound {
			err, done := searched[e.Prefix]
			if !done {
				var masks []string
				masks, err = credentialsIn(e.Prefix, r.cache)
				searched[e.Prefix] = err
				if err == nil {
					pl.masks[e.Prefix] = masks
				}
			}
			if err != nil {
				why := "cannot be searched for credentials: " + err.Error()
				if le := (*protect.LimitError)(nil); errors.As(err, &le) {
					why = le.Why()
				}
				err = fmt.Errorf("resolves to %s, whose install prefix %s %s; cordon binds only a prefix it has searched whole", e.Program, e.Prefix, why)
				if !fromScript[e.Name] {
					return r.errorAt(e.Field, e.Name, e.Auto, err)
				}
				pl.warnings = append(pl.warnings, fmt.Sprintf("toolchain %s (auto, from the script): %v; nothing is bound for it", e.Name, err))
				continue
			}
			e.Masked = pl.masks[e.Prefix]
			if len(e.Masked) > 0 && !told[e.Prefix] {
				told[e.Prefix] = true
				pl.warnings = append(pl.warnings, fmt.Sprintf("toolchain %s: %s holds credentials, which the sandbox sees empty: %s", e.Name, e.Prefix, maskedList(e.Masked)))
			}
		}
		kept = append(kept, e)
	}
	pl.Entries = kept
	return nil
}

// Masks are the paths, relative to the bind (one of Binds), that the
// sandbox sees masked: credentials found in the prefix, shown empty.
func (pl *Plan) Masks(bind string) []string {
	if pl == nil {
		return nil
	}
	return pl.masks[bind]
}

// maxShownMasks bounds the masked paths an entry's line names.
const maxShownMasks = 8

// maskedList names an entry's masked paths, at most maxShownMasks of them.
func maskedList(masked []string) string {
	if len(masked) <= maxShownMasks {
		return strings.Join(masked, ", ")
	}
	return strings.Join(masked[:maxShownMasks], ", ") + fmt.Sprintf(" and %d more", len(masked)-maxShownMasks)
}
