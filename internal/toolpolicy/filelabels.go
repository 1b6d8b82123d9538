package toolpolicy

import (
	"cmp"
	"slices"
)

// FileEntry is one file's labels as FileLabels keeps them, for keeping
// them beyond the gateway's life: by canonical path, or (ByID) by device
// and inode.
type FileEntry struct {
	Path   string   `json:"path,omitempty"`
	Dev    uint64   `json:"dev,omitempty"`
	Ino    uint64   `json:"ino,omitempty"`
	ByID   bool     `json:"by_id,omitempty"`
	Labels []string `json:"labels"`
}

// Entries are f's files and the labels spilled past MaxFiles (which every
// file carries), sorted.
func (f *FileLabels) Entries() (entries []FileEntry, spilled []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, ls := range f.m {
		entries = append(entries, FileEntry{Path: k.path, Dev: k.dev, Ino: k.ino, ByID: k.byID, Labels: slices.Clone(ls)})
	}
	slices.SortFunc(entries, func(a, b FileEntry) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Dev, b.Dev), cmp.Compare(a.Ino, b.Ino))
	})
	return entries, slices.Clone(f.spilled)
}

// Merge adds entries and spilled labels to f, as labelled writes would.
func (f *FileLabels) Merge(entries []FileEntry, spilled []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range entries {
		ls := slices.Clone(e.Labels)
		slices.Sort(ls)
		ls = slices.Compact(ls)
		if len(ls) == 0 {
			continue
		}
		f.addKey(fileKey{path: e.Path, dev: e.Dev, ino: e.Ino, byID: e.ByID}, ls)
	}
	if len(spilled) > 0 {
		ls := slices.Clone(spilled)
		slices.Sort(ls)
		if !containsAll(f.spilled, ls) {
			f.spilled = union(f.spilled, slices.Compact(ls))
			f.changes++
		}
	}
}

// Changes counts f's changes: a caller that keeps f compares it to know
// when to keep it again.
func (f *FileLabels) Changes() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changes
}

// Spill gives every file the labels ls: what was written while they were
// carried cannot all be named (too many files, or they could not be
// looked at), so every file read carries them, as past MaxFiles.
func (f *FileLabels) Spill(ls []string) {
	f.Merge(nil, ls)
}
