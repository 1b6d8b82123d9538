package protect

import (
	"io"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// walkIndex is what a look after a run keeps of a tree for the next one
// (see FindMade): it is a cache, and trusted only because it lies where
// no sandbox reaches and because change times cannot be set back.
type walkIndex struct {
	Root     string
	Dev, Ino uint64
	// Dirs are the tree's directories, by path, with their inode and
	// change time when last listed.
	Dirs map[string]dirMark
	// Watch are the paths judged at every look: the catalog's names,
	// repositories known by structure, files that may be profiles.
	Watch map[string]bool
	// Creds are the stores of credentials and the home directories the
	// tree holds, by path, with what each is (see Sensitive).
	Creds map[string]string
}

type dirMark struct {
	Ino   uint64
	Ctime int64
}

// maxIndex bounds the index file cordon reads.
const maxIndex = 256 << 20

// held keeps the indexes this process made or read, by the root's path,
// for its next look at the same tree: a run's search before it starts and
// its look after it ends share one, as do a server's runs. At most
// maxHeld trees are kept.
var held = struct {
	sync.Mutex
	m map[string]*walkIndex
}{m: map[string]*walkIndex{}}

const maxHeld = 16

// keep holds ix for the next look at its tree in this process.
func keep(ix *walkIndex) {
	held.Lock()
	defer held.Unlock()
	if _, ok := held.m[ix.Root]; !ok && len(held.m) >= maxHeld {
		for k := range held.m {
			delete(held.m, k) // any one: a cache
			break
		}
	}
	held.m[ix.Root] = ix
}

// heldIndex takes the index this process keeps of the tree at root, nil
// when it has none or the root is another directory now. The look that
// takes it owns it until it keeps it again: a look at the same tree at the
// same time reads the file instead.
func heldIndex(root string, st unix.Stat_t) *walkIndex {
	held.Lock()
	defer held.Unlock()
	ix := held.m[root]
	delete(held.m, root)
	if ix == nil || ix.Dev != st.Dev || ix.Ino != st.Ino {
		return nil
	}
	return ix
}

func newIndex(root string, st unix.Stat_t) *walkIndex {
	return &walkIndex{Root: root, Dev: st.Dev, Ino: st.Ino, Dirs: map[string]dirMark{}, Watch: map[string]bool{}, Creds: map[string]string{}}
}

// loadIndex reads the index at file, nil when there is none, it does not
// decode, or it is another tree's.
func loadIndex(file, root string, st unix.Stat_t) *walkIndex {
	var ix walkIndex
	if file == "" || !loadFile(file, &ix) || ix.Root != root || ix.Dev != st.Dev || ix.Ino != st.Ino {
		return nil
	}
	return &ix // decode makes every map
}

// cacheFile is what loadFile and saveFile read and write (see codec_linux.go).
type cacheFile interface {
	encode() []byte
	decode([]byte) error
}

// loadFile decodes the file of cordon's own at file into v: false when it
// is not there, is no regular file (a link is not followed), is larger
// than maxIndex, or does not decode.
func loadFile(file string, v cacheFile) bool {
	f, err := os.OpenFile(file, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	data, err := io.ReadAll(io.LimitReader(f, maxIndex+1))
	if err != nil || len(data) > maxIndex {
		return false
	}
	return v.decode(data) == nil
}

// save writes the index to file (see saveFile).
func (ix *walkIndex) save(file string) { saveFile(file, ix) }

// saveFile writes v to file, through a file renamed into place, in a
// directory it makes if need be (its parent, cordon's state directory,
// must be there); a failure leaves the next reader to do without.
func saveFile(file string, v cacheFile) {
	b := v.encode()
	if len(b) > maxIndex {
		os.Remove(file)
		return
	}
	// Only the file's own directory is made: where cordon's state
	// directory is not there, nothing is kept.
	if err := os.Mkdir(filepath.Dir(file), 0o700); err != nil && !os.IsExist(err) {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".index-*")
	if err != nil {
		return
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
}
