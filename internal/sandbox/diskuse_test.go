//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A layer on disk is measured by its names, and, for what no name shows
// (a file deleted while open), by what its file system lost since the run
// began.
func TestDiskUse(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "upper", "d"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "upper", "d", "f"), make([]byte, 64<<10), 0o644))
	layer, err := os.Open(dir)
	must(err)
	defer layer.Close()

	bound := &Layer{Size: 1 << 20, Inodes: 100, Dir: dir}
	noteFree(dir, bound)
	if u, err := diskUse(layer, bound); err != nil || u.full != "" || u.inodes != 2 {
		t.Fatalf("within the limits: %+v, %v", u, err)
	}
	small := &Layer{Size: 1 << 20, Inodes: 1, Dir: dir}
	if u, _ := diskUse(layer, small); u.full != "workspace_inodes" {
		t.Errorf("2 names past a limit of 1: %+v", u)
	}

	// The file system has lost more than the limit and its margin: as if
	// the sandbox held 2 GiB in files deleted while open.
	var st unix.Statfs_t
	must(unix.Statfs(dir, &st))
	hidden := &Layer{Size: 1 << 20, Inodes: 100, Dir: dir, Free: &[2]uint64{st.Bavail + uint64((2<<30)/st.Bsize), st.Ffree}}
	if u, _ := diskUse(layer, hidden); u.full != "workspace_size" {
		t.Errorf("2 GiB lost past a limit of 1 MiB: %+v", u)
	}
	within := &Layer{Size: 1 << 20, Inodes: 100, Dir: dir, Free: &[2]uint64{st.Bavail + uint64((512<<20)/st.Bsize), st.Ffree}}
	if u, _ := diskUse(layer, within); u.full != "" {
		t.Errorf("512 MiB lost, within the margin: %+v", u)
	}
}
