package changes

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/gitobj"
)

// Bounds of reading a set's git objects: a hostile repository can make
// the reading stop early, never take long or much memory.
const (
	maxGitObjects  = 4096     // objects read in all
	maxGitInflated = 64 << 20 // bytes inflated in all
	maxGitObject   = 8 << 20  // bytes of one object, inflated or not
	maxGitCommits  = 200      // commits shown
	maxGitFiles    = 200      // files shown of one commit
	maxGitDepth    = 64       // tree levels
	maxGitEntries  = 1 << 14  // entries of one tree
	maxLineBlob    = 1 << 20  // bytes of a file whose lines are counted
)

// Git reads what set s (kept in dir) does to the repositories in it: new
// repositories, commits, packs and refs. It reads the objects from the
// set's blobs and, for what the set does not hold (a commit's parent), the
// host's loose objects, through descriptors beneath the workspace; it
// never runs git. Past its bounds it says so in Notes.
func Git(s *Set, dir string) *GitActivity {
	rd, err := runDir(dir, s.Run)
	if err != nil {
		return nil
	}
	r := &gitReader{blobs: filepath.Join(rd, blobDir), objects: map[string]map[string]string{}}
	if host, err := openRoot(s.Workspace); err == nil {
		defer host.Close()
		r.host = host
	}
	repos := map[string]*GitRepo{}
	repo := func(d string) *GitRepo {
		if repos[d] == nil {
			repos[d] = &GitRepo{Dir: d}
		}
		return repos[d]
	}
	views := map[string]*refView{}
	for _, c := range s.Changes {
		d, inside, ok := inDotGit(c.Path)
		if !ok {
			continue
		}
		switch {
		case inside == "HEAD" && c.Kind == Added:
			repo(d).New = true
		case c.Type != TypeFile:
		case strings.HasPrefix(inside, "objects/pack/") && strings.HasSuffix(inside, ".pack") && c.Kind != Deleted:
			repo(d).Packs++
		case strings.HasPrefix(inside, "objects/") && c.Kind == Added:
			if id := strings.Replace(strings.TrimPrefix(inside, "objects/"), "/", "", 1); gitobj.ValidID(id) && len(inside) == len("objects/")+len(id)+1 {
				if r.objects[d] == nil {
					r.objects[d] = map[string]string{}
				}
				r.objects[d][id] = c.SHA256
				repo(d)
			}
		case strings.HasPrefix(inside, "refs/") || inside == "packed-refs":
			if views[d] == nil {
				views[d] = &refView{oldLoose: map[string]string{}, newLoose: map[string]string{}}
			}
			r.refs(views[d], inside, c)
			repo(d)
		}
	}
	for d, v := range views {
		repo(d).Refs = r.moves(d, v)
	}
	var out GitActivity
	for _, d := range sortedKeys(repos) {
		g := repos[d]
		r.commits(g, d)
		if g.New || len(g.Commits)+g.Packs+len(g.Refs)+len(g.Notes) > 0 {
			out.Repos = append(out.Repos, *g)
		}
	}
	if len(out.Repos) == 0 {
		return nil
	}
	return &out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// inDotGit splits p inside a .git directory: the directory and the path
// inside it (the last .git on the way).
func inDotGit(p string) (dir, inside string, ok bool) {
	i := strings.LastIndex("/"+p, "/.git/")
	if i < 0 {
		return "", "", false
	}
	return p[:i+len(".git")], p[i+len(".git/"):], true
}

// gitReader reads a set's objects, within bounds.
type gitReader struct {
	blobs string
	host  *os.File
	// objects are the set's loose objects of each repository: id to
	// blob.
	objects  map[string]map[string]string
	read     int
	inflated int
	spent    bool
}

// object reads the object id of the repository at d: from the set, else
// from the host's loose objects; ok false when it is in neither (in a
// pack), or past the bounds.
func (r *gitReader) object(d, id string) (typ string, body []byte, ok bool) {
	if r.read >= maxGitObjects || r.inflated >= maxGitInflated {
		r.spent = true
		return "", nil, false
	}
	var raw []byte
	if sum, ok := r.objects[d][id]; ok {
		b, err := readFile(filepath.Join(r.blobs, sum), maxGitObject)
		if err != nil {
			return "", nil, false
		}
		raw = b
	} else if r.host != nil {
		raw = hostSmall(r.host, path.Join(d, "objects", id[:2], id[2:]), "", maxGitObject)
	}
	if raw == nil {
		return "", nil, false
	}
	r.read++
	typ, body, err := gitobj.Read(raw, min(maxGitObject, maxGitInflated-r.inflated))
	if err != nil {
		return "", nil, false
	}
	r.inflated += len(body)
	return typ, body, true
}

// commits lists the new commits of g, newest first, with their files.
func (r *gitReader) commits(g *GitRepo, d string) {
	byID := map[string]gitobj.Commit{}
	for _, id := range sortedKeys(r.objects[d]) {
		if len(byID) >= maxGitCommits {
			g.Notes = append(g.Notes, fmt.Sprintf("more than %d new commits: the rest not shown", maxGitCommits))
			break
		}
		typ, body, ok := r.object(d, id)
		if !ok || typ != "commit" {
			continue
		}
		if c, err := gitobj.ParseCommit(body); err == nil {
			byID[id] = c
		}
	}
	// Newest first: each commit before its parents.
	isParent := map[string]bool{}
	for _, c := range byID {
		for _, p := range c.Parents {
			isParent[p] = true
		}
	}
	var order []string
	seen := map[string]bool{}
	var visit func(id string)
	visit = func(id string) {
		c, ok := byID[id]
		if !ok || seen[id] {
			return
		}
		seen[id] = true
		order = append(order, id)
		for _, p := range c.Parents {
			visit(p)
		}
	}
	// Branches' tips first, then other refs', then the rest.
	rank := map[string]int{}
	for _, ref := range g.Refs {
		if strings.HasPrefix(ref.Name, "refs/heads/") {
			rank[ref.New] = -2
		} else if rank[ref.New] == 0 {
			rank[ref.New] = -1
		}
	}
	roots := slices.DeleteFunc(sortedKeys(byID), func(id string) bool { return isParent[id] })
	slices.SortStableFunc(roots, func(a, b string) int { return rank[a] - rank[b] })
	for _, id := range roots {
		visit(id)
	}
	for _, id := range sortedKeys(byID) {
		visit(id) // a cycle, which no real history has
	}
	for _, id := range order {
		c := byID[id]
		gc := GitCommit{Hash: id, Subject: c.Subject, Author: c.Author, Parents: c.Parents}
		r.files(&gc, d, c)
		g.Commits = append(g.Commits, gc)
	}
	if r.spent {
		g.Notes = append(g.Notes, fmt.Sprintf("past %d objects or %d bytes read: not all is shown", maxGitObjects, maxGitInflated))
	}
}

// files fills the files commit c of the repository at d changes against
// its first parent.
func (r *gitReader) files(gc *GitCommit, d string, c gitobj.Commit) {
	idLen := len(c.Tree) / 2
	parentTree := ""
	if len(c.Parents) > 0 {
		typ, body, ok := r.object(d, c.Parents[0])
		if !ok || typ != "commit" {
			gc.FilesNote = "its parent is not a loose object (in a pack, perhaps): files not shown"
			return
		}
		p, err := gitobj.ParseCommit(body)
		if err != nil {
			gc.FilesNote = "its parent cannot be read: files not shown"
			return
		}
		parentTree = p.Tree
	}
	if err := r.diffTrees(gc, d, parentTree, c.Tree, "", idLen, 0); err != nil {
		gc.FilesNote = err.Error() + ": not all files shown"
	}
}

// tree reads the tree id ("" an empty one) as a map of names.
func (r *gitReader) tree(d, id string, idLen int) (map[string]gitobj.Entry, error) {
	out := map[string]gitobj.Entry{}
	if id == "" {
		return out, nil
	}
	typ, body, ok := r.object(d, id)
	if !ok || typ != "tree" {
		return nil, fmt.Errorf("tree %.12s is not a loose object", id)
	}
	es, err := gitobj.ParseTree(body, idLen, maxGitEntries)
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		out[e.Name] = e
	}
	return out, nil
}

// diffTrees adds to gc the files that differ between the trees a and b
// (ids; "" for none) at prefix.
func (r *gitReader) diffTrees(gc *GitCommit, d, a, b, prefix string, idLen, depth int) error {
	if a == b {
		return nil
	}
	if depth > maxGitDepth {
		return fmt.Errorf("deeper than %d directories", maxGitDepth)
	}
	ta, err := r.tree(d, a, idLen)
	if err != nil {
		return err
	}
	tb, err := r.tree(d, b, idLen)
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for n := range ta {
		names[n] = true
	}
	for n := range tb {
		names[n] = true
	}
	for _, n := range sortedKeys(names) {
		ea, inA := ta[n]
		eb, inB := tb[n]
		if inA && inB && ea.ID == eb.ID && ea.Mode == eb.Mode {
			continue
		}
		p := prefix + n
		subA, subB := "", ""
		if inA && ea.Tree() {
			subA = ea.ID
		}
		if inB && eb.Tree() {
			subB = eb.ID
		}
		if subA != "" || subB != "" {
			if err := r.diffTrees(gc, d, subA, subB, p+"/", idLen, depth+1); err != nil {
				return err
			}
		}
		if (inA && !ea.Tree()) || (inB && !eb.Tree()) {
			if len(gc.Files) >= maxGitFiles {
				return fmt.Errorf("more than %d files", maxGitFiles)
			}
			f := GitFile{Path: p}
			var oldID, newID string
			if inA && !ea.Tree() {
				oldID = ea.ID
			}
			if inB && !eb.Tree() {
				newID = eb.ID
			}
			r.lines(&f, d, oldID, newID)
			gc.Files = append(gc.Files, f)
		}
	}
	return nil
}

// lines counts the lines added and removed from blob a to blob b ("" for
// none); a file that cannot be read, or is binary or large, is binary.
func (r *gitReader) lines(f *GitFile, d, a, b string) {
	text := func(id string) (string, bool) {
		if id == "" {
			return "", true
		}
		typ, body, ok := r.object(d, id)
		if !ok || typ != "blob" || len(body) > maxLineBlob || bytes.IndexByte(body, 0) >= 0 {
			return "", false
		}
		return string(body), true
	}
	ta, okA := text(a)
	tb, okB := text(b)
	if !okA || !okB {
		f.Binary = true
		return
	}
	for _, o := range edits(splitLines(ta), splitLines(tb)) {
		switch o.kind {
		case '+':
			f.Added++
		case '-':
			f.Removed++
		}
	}
}

// refView is what a set does to the refs of one repository: the loose
// refs it changes (old and new content, "" for none) and its packed-refs
// (when it changes them).
type refView struct {
	oldLoose, newLoose   map[string]string
	packed               bool
	oldPacked, newPacked map[string]string
}

// refs records in v what change c (inside the repository d) does.
func (r *gitReader) refs(v *refView, inside string, c Change) {
	if c.Type != TypeFile {
		return
	}
	var old, new []byte
	if c.Kind != Deleted {
		new, _ = readFile(filepath.Join(r.blobs, c.SHA256), maxGitObject)
	}
	if c.OldSHA256 != "" && r.host != nil {
		old = hostSmall(r.host, c.Path, c.OldSHA256, maxGitObject)
	}
	if inside == "packed-refs" {
		v.packed, v.oldPacked, v.newPacked = true, packedRefs(old), packedRefs(new)
		return
	}
	if len(v.oldLoose) < maxGitEntries {
		v.oldLoose[inside], v.newLoose[inside] = strings.TrimSpace(string(old)), strings.TrimSpace(string(new))
		if c.OldSHA256 != "" && old == nil {
			v.oldLoose[inside] = "?"
		}
	}
}

// moves lists the refs of the repository at d that v moves: a loose ref
// is taken before a packed one, as git takes it.
func (r *gitReader) moves(d string, v *refView) []GitRef {
	if !v.packed && r.host != nil {
		v.oldPacked = packedRefs(hostSmall(r.host, path.Join(d, "packed-refs"), "", maxGitObject))
		v.newPacked = v.oldPacked
	}
	names := map[string]bool{}
	for n := range v.oldLoose {
		names[n] = true
	}
	if v.packed {
		for n := range v.oldPacked {
			names[n] = true
		}
		for n := range v.newPacked {
			names[n] = true
		}
	}
	value := func(n string, loose, packed map[string]string) string {
		if l, changed := loose[n]; changed {
			if l != "" {
				return l
			}
		} else if r.host != nil {
			if b := hostSmall(r.host, path.Join(d, n), "", 4096); b != nil {
				return strings.TrimSpace(string(b))
			}
		}
		return packed[n]
	}
	var out []GitRef
	for _, n := range sortedKeys(names) {
		if ref := (GitRef{Name: n, Old: value(n, v.oldLoose, v.oldPacked), New: value(n, v.newLoose, v.newPacked)}); ref.Old != ref.New {
			out = append(out, ref)
		}
	}
	return out
}

// packedRefs reads a packed-refs file: ref name to id.
func packedRefs(b []byte) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		id, name, ok := strings.Cut(line, " ")
		if ok && gitobj.ValidID(id) && len(out) < maxGitEntries {
			out[name] = id
		}
	}
	return out
}

// hostSmall reads the host's regular file rel under root, up to max bytes,
// never following a link; with sum, only when it has that content. nil
// when it cannot.
func hostSmall(root *os.File, rel, sum string, max int64) []byte {
	f, err := openBeneath(root, rel, unix.O_RDONLY|unix.O_NONBLOCK, resolveBeneath)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil || int64(len(data)) > max {
		return nil
	}
	if sum != "" {
		if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != sum {
			return nil
		}
	}
	return data
}
