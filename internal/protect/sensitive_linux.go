package protect

import (
	"maps"
	"math"
	"path/filepath"
	"slices"
)

// SensitiveIn is Sensitive by the walk the look after a run makes (see
// FindMade), with the index of the tree it keeps in the file index (none
// for ""), and in this process's memory: only the directories whose change
// time moved since are listed, so that a large workspace costs its first
// run a search in full and later ones little. Both stop at the same
// bounds.
func SensitiveIn(root, index string) string {
	root = filepath.Clean(root)
	if slices.Contains(Homes(), root) {
		return root + " is a home directory"
	}
	w, err := look(root, math.MaxInt64, nil, index)
	if err != nil {
		return "cordon could not search it for credentials: " + err.Error()
	}
	if w.limitErr != nil {
		return w.limitErr.Error() + " (a narrower workspace is searched whole)"
	}
	var what []string
	for _, rel := range slices.Sorted(maps.Keys(w.ix.Creds)) {
		what = append(what, w.ix.Creds[rel])
	}
	return holds(root, what)
}
