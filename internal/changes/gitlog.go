package changes

// GitActivity is what a change set does to the repositories in it (each a
// .git directory), read from its git objects without running git: git on
// the host must never run on what a sandbox wrote before a person has
// seen it.
type GitActivity struct {
	Repos []GitRepo `json:"repos"`
}

// GitRepo is what a set does to one repository.
type GitRepo struct {
	// Dir is the git directory, relative to the workspace.
	Dir string `json:"dir"`
	// New: the set makes the repository (adds its HEAD).
	New bool `json:"new,omitempty"`
	// Commits are the new commits found as loose objects, newest first.
	Commits []GitCommit `json:"commits,omitempty"`
	// Packs counts the new pack files: the commits in them are not shown.
	Packs int `json:"packs,omitempty"`
	// Refs are the branches and tags moved, made or removed.
	Refs []GitRef `json:"refs,omitempty"`
	// Notes say what could not be read, and why.
	Notes []string `json:"notes,omitempty"`
}

// GitCommit is a new commit.
type GitCommit struct {
	Hash    string    `json:"hash"`
	Subject string    `json:"subject"`
	Author  string    `json:"author"`
	Parents []string  `json:"parents,omitempty"`
	Files   []GitFile `json:"files,omitempty"`
	// FilesNote says why the files are not (all) shown.
	FilesNote string `json:"files_note,omitempty"`
}

// GitFile is a file a commit changes against its first parent.
type GitFile struct {
	Path    string `json:"path"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
	Binary  bool   `json:"binary,omitempty"`
}

// GitRef is a ref moved: Old "" when made, New "" when removed.
type GitRef struct {
	Name string `json:"name"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new,omitempty"`
}
