package changes

import (
	"path"
	"slices"

	"os"

	"golang.org/x/sys/unix"
)

// flagGitDirs flags protected the changes inside a directory that may be
// a git repository in the sandbox's view (a HEAD or a commondir, in the
// layer or in the host's tree), whatever its name: git obeys the
// configuration and hooks of a bare repository, or of one a planted file
// makes, as it does .git's.
func (c *capturer) flagGitDirs(upper, host *os.File) {
	known := map[string]bool{}
	isGit := func(dir string) bool {
		v, ok := known[dir]
		if !ok {
			// git takes a HEAD of any kind (a link to refs/... too),
			// and finds objects and refs through links, or through the
			// directory a commondir file names: any HEAD or commondir
			// makes a directory one.
			v = kindIn(upper, host, path.Join(dir, "HEAD")) != 0 ||
				kindIn(upper, host, path.Join(dir, "commondir")) != 0
			known[dir] = v
		}
		return v
	}
	for i := range c.changes {
		ch := &c.changes[i]
		if ch.Has(FlagProtected) {
			continue
		}
		for dir := path.Dir(ch.Path); ; dir = path.Dir(dir) {
			if isGit(dir) {
				ch.Flags = append(ch.Flags, FlagProtected)
				slices.Sort(ch.Flags)
				break
			}
			if dir == "." {
				break
			}
		}
	}
}

// kindIn is the file type of rel in the sandbox's view, as near as the
// layer and the host's tree tell without merging them: the layer's entry
// when it has one (a whiteout: none), else the host's; 0 for none. Only
// ever used to flag more.
func kindIn(upper, host *os.File, rel string) uint32 {
	if st := statBeneath(upper, rel); st != nil {
		if st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0 {
			return 0
		}
		return st.Mode & unix.S_IFMT
	}
	if st := statBeneath(host, rel); st != nil {
		return st.Mode & unix.S_IFMT
	}
	return 0
}

// statBeneath stats rel under d, reached without links and without
// leaving d; nil when there is nothing there.
func statBeneath(d *os.File, rel string) *unix.Stat_t {
	f, err := openBeneath(d, rel, unix.O_PATH, resolveBeneath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return nil
	}
	return &st
}
