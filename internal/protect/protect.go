// Package protect keeps, inside every writable part of a sandbox's view,
// the files that the host's own tools run or obey without being asked
// read-only: git's hooks and configuration, shell start-up files, editor
// and agent settings. An agent that could write .git/config (core.fsmonitor)
// or .git/hooks/pre-commit gets its code run by the user's next `git
// status` or `git commit`, outside any sandbox; one that could write
// .vscode/settings.json or .claude/settings.json gets it run by the user's
// editor or agent.
//
// Make lays this out for one writable bind, before the sandbox starts:
// each protected path that exists is bound read-only onto itself; each
// directory between the bind's root and a protected path is bound onto
// itself, writable, so that it cannot be renamed away and replaced (a
// mount point cannot be renamed or removed); a protected path that does not
// exist gets a placeholder, an empty directory the sandbox sees read-only,
// so that creating the path is refused as writing it is. An empty
// directory is what git, and most tools, ignore, and Remove takes it away
// when the sandbox ends. A symbolic link on the way is refused: cordon
// cannot hold it in place.
//
// The package also knows what holds credentials (Catalog: .ssh, .aws,
// .netrc, an npmrc, a pip.conf, ...), and searches a tree for them within
// bounds (Search): Sensitive refuses a workspace that holds a store of
// secrets or a home directory at any depth, and package toolchain masks
// every credential in a toolchain's prefix.
package protect

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/obey"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// Defaults are the paths, relative to the root of each writable bind, kept
// read-only unless the profile opens them by name (workspace.unprotect);
// one that does not exist gets a placeholder. IfPresent are kept read-only
// only where they exist. Both come from the catalog of what the host's
// tools obey (package obey), whose entries give the reason and source of
// each.
var Defaults, IfPresent = obey.RootNames()

// rootGitfile is the placeholder of a root's .git where there is none: a
// .git file naming a repository that can never exist. git stops there
// with an error, rather than take the root itself as a repository (were
// the run to plant HEAD, objects and refs in it) or look further up, and
// says why.
const rootGitfile = "gitdir: " + RootGitdir + "\n"

// RootGitdir is the repository rootGitfile names, which git names when it
// stops there ("not a git repository: /dev/null/.git-kept-by-cordon").
const RootGitdir = "/dev/null/.git-kept-by-cordon"

// Entry is one path of a writable bind that is bound onto itself.
type Entry struct {
	// Rel is the path relative to the bind's root.
	Rel string `json:"rel"`
	// ReadOnly is false for a directory only pinned in place.
	ReadOnly bool `json:"ro,omitempty"`
}

// Plan is what one writable bind needs: its entries, shallow first, and the
// placeholders made for it.
type Plan struct {
	Root    string
	Entries []Entry
	// Restored names the directories whose permissions the sandbox
	// changed and Remove set back.
	Restored []string
	ghosts   []ghost
	held     []*os.File
	modes    []keptMode
}

// keptMode is the permissions of a directory of the plan, held open.
type keptMode struct {
	f    *os.File
	rel  string
	mode uint32
}

// Options adjust a Plan.
type Options struct {
	// Unprotect are defaults the profile opens by name.
	Unprotect []string
	// Extra are further paths, relative to the root, to keep read-only:
	// the profile cordon runs and its approval record, when they are
	// inside this bind.
	Extra []string
	// SameUser says the sandbox's user is cordon's own host user (a
	// rootless cordon): a placeholder cordon is not allowed to make is then
	// a path the sandbox cannot make either, and is skipped.
	SameUser bool
	// Made, when set, is told of each placeholder just before it is made
	// (a token without its identity) and as soon as it is, with the token
	// Sweep removes it by (see package journal); an error ends the plan,
	// its placeholders removed.
	Made func(token string) error
}

// ErrLink reports a symbolic link where a protected path, or a directory
// leading to one, should be.
var ErrLink = errors.New("is a symbolic link in a writable part of the view, which cordon cannot keep in place; remove the link, or open the path by name (workspace.unprotect)")

// Make plans the protection of the writable bind at root (a host
// directory), creating placeholders. On an error nothing is left behind.
//
// Another run in the same bind may remove a placeholder of its own between
// this plan seeing it and holding it, or make one between this plan
// missing it and making its own: the plan is then made again, as the bind
// now is.
func Make(root string, o Options) (*Plan, error) {
	for try := 1; ; try++ {
		p, err := makePlan(root, o)
		if try < maxReplans && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrExist)) {
			// A random pause, longer each time, so that runs planning in
			// step stop meeting each other.
			time.Sleep(time.Duration(rand.IntN(try*500)) * time.Microsecond)
			continue
		}
		return p, err
	}
}

// maxReplans bounds the plans Make makes while other runs remove their
// placeholders.
const maxReplans = 128

func makePlan(root string, o Options) (*Plan, error) {
	d, err := openRoot(root)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	p := &Plan{Root: root}
	unprotected := map[string]bool{}
	for _, u := range o.Unprotect {
		unprotected[path.Clean(u)] = true
	}
	want, pinOnly, err := wanted(d, o, unprotected)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", root, err)
	}
	pinned := map[string]bool{}
	covered := func(rel string) bool {
		for _, e := range p.Entries {
			if e.ReadOnly && (rel == e.Rel || strings.HasPrefix(rel, e.Rel+"/")) {
				return true
			}
		}
		return false
	}
	for _, rel := range want {
		if covered(rel) {
			continue
		}
		parts := strings.Split(rel, "/")
		for i := range parts {
			sub := strings.Join(parts[:i+1], "/")
			last := i == len(parts)-1
			kind, err := lstat(d, sub)
			if err != nil {
				p.Remove()
				return nil, fmt.Errorf("%s: %w", show(root, sub), err)
			}
			switch {
			case kind == kindLink:
				p.Remove()
				return nil, fmt.Errorf("%s %w", show(root, sub), ErrLink)
			case kind == kindNone && unprotected[sub] && !last:
				// The profile lets the sandbox make this directory: what
				// it makes beneath is its own.
			case kind == kindNone:
				content, isFile := fileGhosts[path.Base(sub)]
				if !last || !gitFile(sub, pinOnly) {
					isFile = false
				}
				if sub == ".git" {
					content, isFile = rootGitfile, true
				}
				if o.Made != nil {
					// Named before it is made, as well as after: a cordon
					// killed in between leaves a placeholder a sweep still
					// finds (see intended).
					if err := o.Made(ghost{rel: sub, ctime: time.Now().UnixNano(), file: isFile, content: content}.token(root)); err != nil {
						p.Remove()
						return nil, fmt.Errorf("placeholder %s: %w", show(root, sub), err)
					}
				}
				g, held, err := mkGhost(d, sub, isFile, content)
				if err != nil && o.SameUser && denied(err) {
					// The sandbox's user is cordon's own: what cordon may
					// not create there, the sandbox may not either.
					break
				}
				if err != nil {
					p.Remove()
					return nil, fmt.Errorf("placeholder %s: %w", show(root, sub), err)
				}
				p.ghosts = append(p.ghosts, g)
				p.held = append(p.held, held)
				if o.Made != nil {
					if err := o.Made(g.token(root)); err != nil {
						p.Remove()
						return nil, fmt.Errorf("placeholder %s: %w", show(root, sub), err)
					}
				}
				p.Entries = append(p.Entries, Entry{Rel: sub, ReadOnly: true})
			case last && kind == kindDir && pinOnly[sub]:
				pinned[sub] = true
				p.Entries = append(p.Entries, Entry{Rel: sub})
			case last:
				if kind == kindMultiLink {
					p.Remove()
					return nil, fmt.Errorf("%s has more than one name (a hard link), so it could be written through another; cordon refuses to run with it in a writable part of the view", show(root, sub))
				}
				p.Entries = append(p.Entries, Entry{Rel: sub, ReadOnly: true})
			case kind == kindDir && !pinned[sub]:
				pinned[sub] = true
				p.Entries = append(p.Entries, Entry{Rel: sub})
			}
			if kind != kindDir {
				break
			}
		}
	}
	if err := p.hold(d); err != nil {
		p.Remove()
		return nil, err
	}
	p.keepModes(d)
	sort.SliceStable(p.Entries, func(i, j int) bool {
		return strings.Count(p.Entries[i].Rel, "/") < strings.Count(p.Entries[j].Rel, "/")
	})
	return p, nil
}

// wanted lists the paths to protect under the root: the defaults the
// profile keeps, what git obeys in each repository of the bind (gitPaths),
// and the extras; and the git directories, which are only pinned.
func wanted(d *os.File, o Options, skip map[string]bool) (out []string, pinOnly map[string]bool, err error) {
	seen := map[string]bool{}
	add := func(rel string) {
		rel = path.Clean(rel)
		if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || path.IsAbs(rel) || skip[rel] || seen[rel] {
			return
		}
		seen[rel] = true
		out = append(out, rel)
	}
	for _, rel := range Defaults {
		add(rel)
	}
	for _, rel := range IfPresent {
		if k, err := lstat(d, rel); err == nil && k != kindNone {
			add(rel)
		}
	}
	pinOnly = map[string]bool{}
	if !skip[".git"] {
		gits, err := gitPaths(d, d.Name())
		if err != nil {
			return nil, nil, err
		}
		for _, g := range gits.dirs {
			pinOnly[g] = true
		}
		for _, rel := range gits.paths {
			add(rel)
		}
	}
	for _, rel := range o.Extra {
		add(rel)
	}
	return out, pinOnly, nil
}

// Remove takes away the placeholders that are still as they were made
// (the same, empty directory or the same file with the same content) and
// that no other sandbox holds, and lets go of what the plan held.
func (p *Plan) Remove() {
	if p == nil {
		return
	}
	p.restoreModes()
	for _, k := range p.modes {
		k.f.Close()
	}
	p.modes = nil
	for _, f := range p.held {
		f.Close()
	}
	p.held = nil
	for i := len(p.ghosts) - 1; i >= 0; i-- {
		p.ghosts[i].remove(p.Root)
	}
	p.ghosts = nil
}

// Placeholders names the placeholders made, relative to the root.
func (p *Plan) Placeholders() []string {
	var out []string
	for _, g := range p.ghosts {
		out = append(out, g.rel)
	}
	return out
}

// ID is a file's identity on the host: its device and inode numbers, the
// same through every bind of its file system.
type ID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// PlaceholderIDs are the identities of the placeholders made: a listing
// that leaves them out leaves out exactly cordon's, never a file of the
// same name the user made.
func (p *Plan) PlaceholderIDs() []ID {
	var out []ID
	for _, g := range p.ghosts {
		out = append(out, ID{Dev: g.dev, Ino: g.ino})
	}
	return out
}

// Tokens describe the placeholders for a process that removes them if
// cordon dies first (see Sweep): the root, the path and a file's content
// (hex, so that any byte survives an argument list), and the device, inode
// and change time.
func (p *Plan) Tokens() []string {
	var out []string
	for _, g := range p.ghosts {
		out = append(out, g.token(p.Root))
	}
	return out
}

// token describes the placeholder under root for Sweep.
func (g ghost) token(root string) string {
	return fmt.Sprintf("%x:%x:%d:%d:%d:%t:%x", root, g.rel, g.dev, g.ino, g.ctime, g.file, g.content)
}

// Sweep removes the placeholders that tokens describe, as Remove would:
// only where each is still as cordon made it and no sandbox holds it. Call
// it once the sandbox is gone. A token is taken for no more than what
// cordon makes (see placeholder): whoever wrote it, it can name only an
// empty directory, or a file with the content cordon gives one of that
// name. A token of a placeholder about to be made (see Options.Made)
// that no token of it made follows removes what cordon made there in the
// moment after (see intended). It returns how many it removed.
func Sweep(tokens []string) int {
	removed := 0
	made := map[[2]string]bool{}
	for _, t := range tokens {
		if f := strings.Split(t, ":"); len(f) == 7 && f[3] != "0" {
			made[[2]string{f[0], f[1]}] = true
		}
	}
	for i := len(tokens) - 1; i >= 0; i-- {
		f := strings.Split(tokens[i], ":")
		if len(f) != 7 {
			continue
		}
		root, err1 := hex.DecodeString(f[0])
		rel, err2 := hex.DecodeString(f[1])
		content, err3 := hex.DecodeString(f[6])
		dev, err4 := strconv.ParseUint(f[2], 10, 64)
		ino, err5 := strconv.ParseUint(f[3], 10, 64)
		ctime, err6 := strconv.ParseInt(f[4], 10, 64)
		if errors.Join(err1, err2, err3, err4, err5, err6) != nil {
			continue
		}
		g := ghost{rel: string(rel), dev: dev, ino: ino, ctime: ctime, file: f[5] == "true", content: string(content)}
		if g.ino == 0 && made[[2]string{f[0], f[1]}] {
			continue // made, and named as made
		}
		if placeholder(string(root), g) && g.remove(string(root)) {
			removed++
		}
	}
	return removed
}

// placeholder reports whether g is one cordon could have made under root:
// a clean path below it, and an empty directory, or a file with the
// content cordon writes in one of its name (the root's .git, a git
// directory's commondir and config.worktree).
func placeholder(root string, g ghost) bool {
	if !path.IsAbs(root) || path.Clean(root) != root || g.rel == "" || g.rel == "." || path.IsAbs(g.rel) || path.Clean(g.rel) != g.rel || g.rel == ".." || strings.HasPrefix(g.rel, "../") {
		return false
	}
	if !g.file {
		return g.content == ""
	}
	if g.rel == ".git" {
		return g.content == rootGitfile
	}
	content, ok := fileGhosts[path.Base(g.rel)]
	return ok && g.content == content
}

// show names a path under a writable bind for a message: its name is the
// sandbox's choice, so control characters are escaped (see termsafe).
func show(root, rel string) string { return termsafe.Line(path.Join(root, rel)) }
