package protect

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
)

// Search is a bounded search of a directory tree for credentials (see
// Catalog) and home directories. It never follows a symbolic link: a
// link is reported by its own name, and what it leads to is not read.
type Search struct {
	// MaxEntries bounds the names read, MaxDepth the directories
	// descended below the root (its entries are at depth 1). Past either
	// the search stops with a *LimitError: what it has not read, it
	// cannot vouch for.
	MaxEntries int
	MaxDepth   int
	// StoresOnly looks for stores of secrets only (Credential.Store).
	StoresOnly bool
	// Homes, when not nil, are home directories (real paths) to report
	// where the tree holds one.
	Homes []string
	// SameFiles also reports, for each regular file found that has more
	// than one name, its other names in the tree (hard links), as its
	// credential: each reads the same content.
	SameFiles bool
}

// Found is a credential or home directory a Search found.
type Found struct {
	// Rel is the path relative to the root searched.
	Rel string
	// Cred is what Rel holds; zero for a home directory.
	Cred Credential
	Home bool
	Dir  bool
	Link bool
	// SameAs names the file found that Rel is another name of (a hard
	// link), "" otherwise.
	SameAs string
}

// What says in a few words what was found.
func (f Found) What() string {
	switch {
	case f.Home:
		return f.Rel + " (a home directory)"
	case f.SameAs != "":
		return f.Rel + " (a hard link of " + f.SameAs + ")"
	}
	return f.Rel + " (" + f.Cred.Why + ")"
}

// LimitError says that a Search stopped at one of its bounds.
type LimitError struct {
	Root string
	// Entries is set when the names read reached MaxEntries, Depth when
	// a directory lay deeper than MaxDepth (At).
	Entries, Depth int
	At             string
}

func (e *LimitError) Error() string { return e.Root + " " + e.Why() }

// Why is the error without the root's name.
func (e *LimitError) Why() string {
	if e.Depth > 0 {
		return fmt.Sprintf("is deeper than %d directories (at %s): cordon stopped looking for credentials there", e.Depth, e.At)
	}
	return fmt.Sprintf("holds more than %d files and directories: cordon stopped looking for credentials there", e.Entries)
}

// In searches the directory root. Its results are in the order of the
// walk, which reads each directory in the order the file system lists it.
func (s Search) In(root string) ([]Found, error) { return s.in(root, nil, nil) }

// in is In, telling onDir of each directory it reads (rel below the root,
// open as f) and onSkip of each it cannot open (name in parent), when
// they are not nil.
func (s Search) in(root string, onDir func(rel string, f *os.File), onSkip func(rel string, parent *os.File, name string)) ([]Found, error) {
	root = filepath.Clean(root)
	w := &walker{s: s, root: root, real: root, homes: map[string]bool{}, onDir: onDir, onSkip: onSkip}
	if real, err := filepath.EvalSymlinks(root); err == nil {
		w.real = real
	}
	for _, h := range s.Homes {
		w.homes[h] = true
	}
	if err := w.walk(); err != nil {
		return nil, err
	}
	if len(w.targets) > 0 {
		// Another name of a file found reads the same content: a second
		// walk, which looks at every file's identity, finds them. Rare:
		// most files have one name.
		w.entries = 0
		if err := w.walk(); err != nil {
			return nil, err
		}
	}
	return w.found, nil
}

type walker struct {
	s Search
	// root is the directory searched, real its path with links resolved,
	// as homes are known.
	root, real string
	homes      map[string]bool
	entries    int
	found      []Found
	// targets are, for SameFiles, the regular files found that have
	// other names, by identity; set once the first walk is done.
	targets map[[2]uint64]string
	second  bool
	// onDir and onSkip, when set, are told of each directory read, and of
	// each that could not be opened.
	onDir  func(rel string, f *os.File)
	onSkip func(rel string, parent *os.File, name string)
}

func (w *walker) walk() error {
	f, err := openDir(w.root)
	if err != nil {
		return err
	}
	err = w.dir(f, "", 0)
	w.second = true
	return err
}

// dir reads the directory f (rel below the root, depth directories
// down), and closes it.
func (w *walker) dir(f *os.File, rel string, depth int) error {
	defer f.Close()
	if w.onDir != nil {
		w.onDir(rel, f)
	}
	for {
		ents, err := f.ReadDir(512)
		for _, e := range ents {
			if w.entries++; w.entries > w.s.MaxEntries {
				return &LimitError{Root: w.root, Entries: w.s.MaxEntries}
			}
			typ := e.Type()
			isDir, isLink := typ.IsDir(), typ&os.ModeSymlink != 0
			if !isDir && !named(e.Name()) && !(w.second && typ.IsRegular()) {
				continue // most files: nothing to look at but the name
			}
			crel := path.Join(rel, e.Name())
			if c, ok := Match(crel, isDir, w.s.StoresOnly); ok {
				if !w.second {
					w.found = append(w.found, Found{Rel: crel, Cred: c, Dir: isDir, Link: isLink})
					if err := w.noteTarget(f, e.Name(), crel, typ); err != nil {
						return err
					}
				}
				continue
			}
			if w.second && typ.IsRegular() {
				if err := w.sameFile(f, e.Name(), crel); err != nil {
					return err
				}
			}
			if !isDir {
				continue
			}
			if len(w.homes) > 0 && w.homes[filepath.Join(w.real, crel)] {
				if !w.second {
					w.found = append(w.found, Found{Rel: crel, Home: true, Dir: true})
				}
				continue
			}
			if depth+1 > w.s.MaxDepth {
				return &LimitError{Root: w.root, Depth: w.s.MaxDepth, At: crel}
			}
			child, err := openChild(f, e.Name(), filepath.Join(w.root, crel))
			if err != nil {
				return err
			}
			if child == nil {
				// Gone since it was listed, or closed to cordon's user,
				// which the sandbox's user is no more than (a database's
				// directory another user owns, in a rootless cordon).
				if w.onSkip != nil {
					w.onSkip(crel, f, e.Name())
				}
				continue
			}
			if err := w.dir(child, crel, depth+1); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(ents) == 0) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", filepath.Join(w.root, rel), err)
		}
	}
}

// noteTarget records, for SameFiles, the regular file found at rel (name
// in the directory f) when it has more than one name.
func (w *walker) noteTarget(f *os.File, name, rel string, typ os.FileMode) error {
	if !w.s.SameFiles || !typ.IsRegular() {
		return nil
	}
	id, nlink, ok, err := fileID(f, name, filepath.Join(w.root, rel))
	if err != nil || !ok || nlink < 2 {
		return err
	}
	if w.targets == nil {
		w.targets = map[[2]uint64]string{}
	}
	w.targets[id] = rel
	return nil
}

// sameFile reports the regular file at rel (name in the directory f) when
// it is another name of a file found.
func (w *walker) sameFile(f *os.File, name, rel string) error {
	id, _, ok, err := fileID(f, name, filepath.Join(w.root, rel))
	if err != nil || !ok {
		return err
	}
	if of, hit := w.targets[id]; hit && of != rel {
		for _, fo := range w.found {
			if fo.Rel == of {
				w.found = append(w.found, Found{Rel: rel, Cred: fo.Cred, SameAs: of})
				break
			}
		}
	}
	return nil
}
