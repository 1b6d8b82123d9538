// Package obey is the one catalog of what the host's own tools run or obey
// in a tree that a sandbox could write: git's hooks and configuration,
// other version control systems' configuration, environment loaders,
// package managers' project configuration, editor and agent settings,
// cordon's own profiles and approval records. An agent that could write
// such a file gets its code run by the user's next `git status`, `hg
// status`, `yarn`, editor or agent session, outside any sandbox.
//
// Every mode of a writable workspace applies this one catalog: direct mode
// keeps what it names read-only at the root of each writable bind and
// reports what a run made elsewhere (package protect), review mode flags
// it in a change set (package changes), and the linter and the
// documentation (docs/THREATS.md) list it.
//
// Names alone are not enough: git takes any directory holding HEAD, objects
// and refs as a repository, whatever the directory is called, so a
// repository is recognised by its structure (GitDir), wherever it is.
// Inside one, not everything is obeyed: JudgeGit tells the data a commit,
// a merge or a stash writes (objects, refs, logs, the index) from what git
// runs or obeys, and GitConfigHeld reads a configuration file as git does
// (ParseGitConfig) to name the variables that would make git run
// something; the rest is on a short safe list (SafeGitKey).
//
// The package is pure: it matches paths and reads nothing; its callers
// look at the tree.
package obey

import (
	"bytes"
	"path"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Where says where a tool reads an entry's files from.
type Where string

// Places a tool reads its files from.
const (
	Project Where = "project" // the project's tree (the working directory or a parent)
	Home    Where = "home"    // the user's home directory
	Both    Where = "both"
)

// Entry is one kind of file a host tool runs or obeys.
type Entry struct {
	// Tool is the host program that reads the files.
	Tool string
	// Obeys says what it runs or obeys from them.
	Obeys string
	// Where it reads them from.
	Where Where
	// Source is the tool's public documentation of it.
	Source string
	// Names are paths relative to the directory the tool reads them from
	// (".vscode", ".github/workflows"); each is matched at any depth of a
	// tree, itself and everything under it (a nested project is read as
	// the top one is).
	Names []string
	// Globs are patterns of the last names of a path, each name a
	// path.Match pattern, written **/NAME or **/DIR/NAME ("**/*.pth"): for
	// what a name alone cannot say. Each is matched at any depth.
	Globs []string
	// Placeholder says direct mode keeps the Names read-only at the root
	// of every writable bind even where they do not exist, so that the
	// sandbox cannot make them; otherwise only where they exist.
	Placeholder bool
	// Watch, for a name that is a repository's directory, are the paths
	// inside it that the tool obeys; the rest (objects, a store) is data
	// that every commit changes. Empty: all of it is obeyed.
	Watch []string
}

// Matches reports whether rel (slash-separated, relative to a tree's root,
// clean) is one of e's files, or under one.
func (e *Entry) Matches(rel string) bool {
	for _, n := range e.Names {
		if underName(rel, n) {
			return true
		}
	}
	for _, g := range e.Globs {
		if tailMatch(g, rel) {
			return true
		}
	}
	return false
}

// underName reports whether the path name (one or more components) occurs
// in rel as whole components: rel is name, ends in it, or passes through
// it.
func underName(rel, name string) bool {
	for i := 0; ; {
		j := strings.Index(rel[i:], name)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(name)
		if (j == 0 || rel[j-1] == '/') && (end == len(rel) || rel[end] == '/') {
			return true
		}
		i = j + 1
	}
}

// tailMatch matches a glob of the form **/a/b against the last names of
// rel.
func tailMatch(glob, rel string) bool {
	g, ok := index().globs[glob]
	if !ok {
		g = compile(glob)
	}
	return tailMatchPats(g, rel)
}

// tailMatchPats matches the names g against the last names of rel.
func tailMatchPats(g []namePat, rel string) bool {
	for i := len(g) - 1; i >= 0; i-- {
		if rel == "" {
			return false
		}
		var rn string
		rel, rn = cutLast(rel)
		if !g[i].match(rn) {
			return false
		}
	}
	return true
}

// cutLast splits the last name off p.
func cutLast(p string) (rest, last string) {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return "", p
}

// namePat is one name of a glob, compiled: a literal, *SUFFIX, PREFIX*, or
// another path.Match pattern.
type namePat struct {
	kind byte // '=', 's' (suffix), 'p' (prefix), 'm' (path.Match)
	s    string
}

func (n namePat) match(name string) bool {
	switch n.kind {
	case '=':
		return name == n.s
	case 's':
		return strings.HasSuffix(name, n.s)
	case 'p':
		return strings.HasPrefix(name, n.s)
	}
	ok, _ := path.Match(n.s, name)
	return ok
}

// compile splits a glob **/a/b into its names.
func compile(glob string) []namePat {
	var out []namePat
	for _, n := range strings.Split(strings.TrimPrefix(glob, "**/"), "/") {
		const meta = `*?[\`
		switch i := strings.IndexAny(n, meta); {
		case i < 0:
			out = append(out, namePat{'=', n})
		case i == 0 && n[0] == '*' && !strings.ContainsAny(n[1:], meta):
			out = append(out, namePat{'s', n[1:]})
		case i == len(n)-1 && n[i] == '*':
			out = append(out, namePat{'p', n[:i]})
		default:
			out = append(out, namePat{'m', n})
		}
	}
	return out
}

// index finds entries by one name: the entries with that name among their
// Names (of one component), and the rest, which Match tries in full; and
// the catalog's globs, compiled. It is built when first used.
var index = sync.OnceValue(func() (ix catalogIndex) {
	ix.byName, ix.globs = map[string]int{}, map[string][]namePat{}
	for i, e := range Catalog {
		multi := len(e.Globs) > 0
		for _, n := range e.Names {
			if strings.Contains(n, "/") {
				multi = true
			} else if _, dup := ix.byName[n]; !dup {
				ix.byName[n] = i
			}
		}
		for _, g := range e.Globs {
			ix.globs[g] = compile(g)
		}
		if multi {
			ix.rest = append(ix.rest, i)
		}
	}
	for _, g := range cordonFiles.Globs {
		ix.globs[g] = compile(g)
	}
	return ix
})

type catalogIndex struct {
	byName map[string]int
	rest   []int
	globs  map[string][]namePat
}

// Match returns the catalog's entry that rel is, or is under, by name; nil
// for none. Repositories recognised by structure, and files recognised by
// content (Content), are the callers' to add.
func Match(rel string) *Entry { return match(rel, nil) }

// match is Match without the entries of the names skip says to pass over.
func match(rel string, skip func(name string) bool) *Entry {
	for p := rel; p != ""; {
		var n string
		n, p, _ = strings.Cut(p, "/")
		if skip != nil && skip(n) {
			continue
		}
		if i, ok := index().byName[n]; ok {
			return &Catalog[i]
		}
	}
	for _, i := range index().rest {
		if Catalog[i].Matches(rel) {
			return &Catalog[i]
		}
	}
	return nil
}

// LinkMatch is the entry a link at rel may stand in for: the one Match
// gives, or one with a name or glob of several parts that rel's last
// names begin (a link named .github makes .github/workflows whatever its
// target holds, and what is written there later is written under another
// name).
func LinkMatch(rel string) *Entry {
	if e := Match(rel); e != nil {
		return e
	}
	for _, i := range index().rest {
		e := &Catalog[i]
		for _, n := range e.Names {
			for p := n; strings.Contains(p, "/"); {
				p = path.Dir(p)
				if rel == p || strings.HasSuffix(rel, "/"+p) {
					return e
				}
			}
		}
		for _, g := range e.Globs {
			pats := index().globs[g]
			for j := len(pats) - 1; j > 0; j-- {
				if tailMatchPats(pats[:j], rel) {
					return e
				}
			}
		}
	}
	return nil
}

// RootNames are the Names of entries, for direct mode's protection of a
// writable bind's root: those with a placeholder (kept even where absent)
// and the others (kept where present).
func RootNames() (always, ifPresent []string) {
	for _, e := range Catalog {
		for _, n := range e.Names {
			if e.Placeholder {
				always = append(always, n)
			} else {
				ifPresent = append(ifPresent, n)
			}
		}
	}
	return always, ifPresent
}

// GitMarkers are the names that make a directory a git directory: git
// takes a directory as one when it holds a valid HEAD and objects and refs
// (or a commondir naming where those are). A directory holding any of
// them, in the tree as it will be, is treated as one or as about to become
// one.
var GitMarkers = []string{"HEAD", "commondir", "objects", "refs"}

// GitObeyed are the paths inside a git directory that git runs or obeys:
// its configuration (and so its includes, fsmonitor, filters, drivers,
// aliases, hooksPath), its hooks, the attributes that select filter and
// diff drivers, the files that say where its repository or work tree is,
// and its linked worktrees' and submodules' own git directories.
var GitObeyed = []string{"HEAD", "config", "config.worktree", "hooks", "info/attributes", "commondir", "gitdir", "worktrees", "modules"}

// GitWatch are the paths of GitObeyed that a repository's everyday work
// leaves alone: HEAD moves with every checkout, and linked worktrees and
// submodules are repositories of their own, looked at as such.
var GitWatch = []string{"config", "config.worktree", "hooks", "info/attributes", "commondir", "gitdir"}

// IsGitObeyed reports whether rel, relative to a git directory, is one of
// GitObeyed or under one.
func IsGitObeyed(rel string) bool {
	for _, n := range GitObeyed {
		if rel == n || strings.HasPrefix(rel, n+"/") {
			return true
		}
	}
	return false
}

// GitDir reports whether dir (relative to a tree's root, "." for the root)
// is a git directory, or about to become one, in a tree where has says
// which paths exist: it holds a HEAD or a commondir, or both objects and
// refs (the rest of a repository, waiting for a HEAD). The caller judges
// the tree as it will be: the host's, with every change still held and
// the one being judged.
func GitDir(has func(rel string) bool, dir string) bool {
	at := func(n string) bool { return has(path.Join(dir, n)) }
	return at("HEAD") || at("commondir") || (at("objects") && at("refs"))
}

// Content returns the entry of a file that cordon itself obeys, known by
// what it holds rather than its name, or nil: a profile (a YAML or JSON
// document whose top-level mapping has the keys version and agent) or an
// approval record (profile_sha256 and approved_by), whatever the file is
// called. data is the whole file; past MaxContent bytes it is no profile
// (cordon reads none that large). The document is parsed, never decoded:
// keys are compared as YAML reads them (quoted, escaped, in flow style), and
// no alias is expanded.
func Content(data []byte) *Entry {
	if len(data) > MaxContent || !bytes.Contains(data, []byte(":")) || !mayHoldKeys(data) {
		return nil
	}
	keys := topKeys(data)
	if (keys["version"] && keys["agent"]) || (keys["profile_sha256"] && keys["approved_by"]) {
		return cordonFiles
	}
	return nil
}

// contentKeys are the pairs of top-level keys Content looks for.
var contentKeys = [][2][]byte{{[]byte("version"), []byte("agent")}, {[]byte("profile_sha256"), []byte("approved_by")}}

// mayHoldKeys reports whether data may spell both keys of a pair of
// contentKeys, as the parser would read them: a cheap test before the
// parse, which most files (source, JSON) fail. A YAML key is written as it
// reads (plain, single- or double-quoted, in block or flow style, or in
// an anchored node an alias or a merge brings in) except in a
// double-quoted scalar, where a numeric escape (\xHH, \uHHHH,
// \UHHHHHHHH) may stand for any character (the parser takes digits that
// are no hexadecimal ones too) and an escaped line break joins two lines:
// the test reads data with every such escape as a character that matches
// any, and every escaped line break gone, wherever they are, which holds
// every key the parser could read, and more.
func mayHoldKeys(data []byte) bool {
	has := func(d []byte, match func([]byte, []byte) bool) bool {
		for _, pair := range contentKeys {
			if match(d, pair[0]) && match(d, pair[1]) {
				return true
			}
		}
		return false
	}
	if has(data, bytes.Contains) {
		return true
	}
	if bytes.IndexByte(data, '\\') < 0 {
		return false
	}
	return has(decodeEscapes(data), containsWild)
}

// anyChar stands, in what decodeEscapes returns, for a character a numeric
// escape makes; it is no byte of UTF-8.
const anyChar = 0xff

// decodeEscapes turns in data every \x, \u and \U with the 2, 4 or 8
// characters after it into anyChar, and drops every escaped line break
// with the blanks after it; the rest is kept as it is.
func decodeEscapes(data []byte) []byte {
	out := make([]byte, 0, len(data))
	for i := 0; i < len(data); i++ {
		c := data[i]
		if c != '\\' || i+1 >= len(data) {
			out = append(out, c)
			continue
		}
		n := 0
		switch data[i+1] {
		case 'x':
			n = 2
		case 'u':
			n = 4
		case 'U':
			n = 8
		case '\\':
			out = append(out, c, c) // an escaped backslash: no escape after it
			i++
			continue
		case '\n', '\r':
			j := i + 1
			if data[j] == '\r' && j+1 < len(data) && data[j+1] == '\n' {
				j++
			}
			for j+1 < len(data) && (data[j+1] == ' ' || data[j+1] == '\t') {
				j++
			}
			i = j
			continue
		}
		if n == 0 {
			out = append(out, c)
			continue
		}
		out = append(out, anyChar)
		j := i + 2
		for k := 0; k < n && j < len(data); k++ { // characters, not bytes
			_, size := utf8.DecodeRune(data[j:])
			j += size
		}
		i = j - 1
	}
	return out
}

// containsWild reports whether d holds word, anyChar in d matching any
// byte of it.
func containsWild(d, word []byte) bool {
	if bytes.Contains(d, word) {
		return true
	}
	for at := 0; ; {
		w := bytes.IndexByte(d[at:], anyChar)
		if w < 0 {
			return false
		}
		w += at
		for off := 0; off < len(word); off++ { // the wildcard as word[off]
			start := w - off
			if start < 0 || start+len(word) > len(d) {
				continue
			}
			ok := true
			for k := range word {
				if b := d[start+k]; b != word[k] && b != anyChar {
					ok = false
					break
				}
			}
			if ok {
				return true
			}
		}
		at = w + 1
	}
}

// MaxContent is the size of the largest profile cordon reads.
const MaxContent = 1 << 20

// topKeys are the keys of the top-level mappings of the documents in data,
// as the YAML parser reads them, with what anchors, tags, aliases and merge
// keys (<<) bring in, as a decoder would see them; none when it does not
// parse. No alias is expanded more than maxKeyDepth deep.
func topKeys(data []byte) (keys map[string]bool) {
	keys = map[string]bool{}
	defer func() {
		if recover() != nil { // the parser may panic on malformed input
			keys = map[string]bool{}
		}
	}()
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return keys
	}
	for _, doc := range file.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		anchors := map[string]ast.Node{}
		for _, n := range ast.Filter(ast.AnchorType, doc.Body) {
			if a, ok := n.(*ast.AnchorNode); ok && a.Name != nil {
				anchors[a.Name.GetToken().Value] = a.Value
			}
		}
		budget := maxKeyVisits
		keysOf(doc.Body, anchors, 0, keys, &budget)
	}
	return keys
}

// maxKeyDepth bounds the anchors, tags, aliases and merges followed to
// find a mapping's keys, and maxKeyVisits the nodes looked at in all (an
// alias may stand for a node that holds it).
const (
	maxKeyDepth  = 32
	maxKeyVisits = 1 << 16
)

// keysOf adds the keys of the mapping n stands for to keys, looking at
// no more than *budget nodes.
func keysOf(n ast.Node, anchors map[string]ast.Node, depth int, keys map[string]bool, budget *int) {
	if *budget--; n == nil || depth > maxKeyDepth || *budget < 0 {
		return
	}
	switch v := n.(type) {
	case *ast.AnchorNode:
		keysOf(v.Value, anchors, depth+1, keys, budget)
	case *ast.TagNode:
		keysOf(v.Value, anchors, depth+1, keys, budget)
	case *ast.AliasNode:
		if v.Value != nil {
			keysOf(anchors[v.Value.GetToken().Value], anchors, depth+1, keys, budget)
		}
	case *ast.SequenceNode:
		// Only as the value of a merge key: each item a mapping to merge.
		for _, item := range v.Values {
			keysOf(item, anchors, depth+1, keys, budget)
		}
	case *ast.MappingNode:
		for _, mv := range v.Values {
			keysOf(mv, anchors, depth+1, keys, budget)
		}
	case *ast.MappingValueNode:
		k := keyName(v.Key, anchors, depth)
		if k == "<<" {
			keysOf(v.Value, anchors, depth+1, keys, budget)
		} else if k != "" {
			keys[k] = true
		}
	}
}

// keyName is a mapping key's text, through anchors, tags and aliases.
func keyName(k ast.Node, anchors map[string]ast.Node, depth int) string {
	for ; k != nil && depth <= maxKeyDepth; depth++ {
		switch v := k.(type) {
		case *ast.MergeKeyNode:
			return "<<"
		case *ast.AnchorNode:
			k = v.Value
		case *ast.TagNode:
			k = v.Value
		case *ast.AliasNode:
			if v.Value == nil {
				return ""
			}
			k = anchors[v.Value.GetToken().Value]
		case *ast.StringNode:
			return v.Value
		case *ast.MappingKeyNode:
			k = v.Value
		default:
			if tk := k.GetToken(); tk != nil {
				return tk.Value
			}
			return ""
		}
	}
	return ""
}
