package protect

import "github.com/cordon-sandbox/cordon/internal/obey"

// Protected reports whether rel, a slash-separated path relative to a
// workspace's root, is one the host's tools run or obey by its name, as
// the catalog (package obey) has it: a name of an entry at any depth (a
// submodule's .git, a nested .vscode), or a path one of its patterns
// matches. A change set flags such a path for review; repositories known
// by their structure and files known by their content are its caller's to
// add.
func Protected(rel string) bool { return obey.Match(rel) != nil }
