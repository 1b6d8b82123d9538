package sandbox

import (
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// layerEvery is how often a reviewed workspace's layer is checked for
// being full while the sandbox runs.
const layerEvery = 20 * time.Millisecond

// layerSocket makes the socket on which init sends the root of a reviewed
// workspace's layer (see LayerFD). peer is init's end; got yields the
// layer's root once init sent it, or nil when init ended without. For a
// guarded workspace, own is the host's own descriptor of the layer's
// directory: what init sends only says the overlay is in place, and must
// be that directory; got then yields own (which layerSocket owns from its
// call on, and closes if it yields something else).
func layerSocket(own *os.File) (peer *os.File, got <-chan *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	ours := os.NewFile(uintptr(fds[0]), "layer socket")
	ch := make(chan *os.File, 1)
	go func() {
		defer ours.Close()
		f, err := wire.RecvFD(ours)
		switch {
		case own != nil:
			same := err == nil && sameFile(f, own)
			if f != nil {
				f.Close()
			}
			f = own
			if !same {
				own.Close()
				f = nil
			}
		case err != nil:
			f = nil
		case !isLayer(f):
			f.Close()
			f = nil
		}
		ch <- f
	}()
	return os.NewFile(uintptr(fds[1]), "layer socket"), ch, nil
}

// openLayerDir opens the host directory of a guarded workspace's layer,
// following no link.
func openLayerDir(dir string) (*os.File, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// sameFile reports whether a and b are the same directory.
func sameFile(a, b *os.File) bool {
	var x, y unix.Stat_t
	return a != nil && unix.Fstat(int(a.Fd()), &x) == nil && unix.Fstat(int(b.Fd()), &y) == nil &&
		x.Dev == y.Dev && x.Ino == y.Ino && x.Mode&unix.S_IFMT == unix.S_IFDIR
}

// isLayer checks that what init sent is a directory on a tmpfs.
func isLayer(f *os.File) bool {
	var st unix.Statfs_t
	var fi unix.Stat_t
	return f != nil && unix.Fstatfs(int(f.Fd()), &st) == nil && st.Type == unix.TMPFS_MAGIC &&
		unix.Fstat(int(f.Fd()), &fi) == nil && fi.Mode&unix.S_IFMT == unix.S_IFDIR
}

// layerUse is how much of a layer is used, and which limit it has reached
// ("" for none).
type layerUse struct {
	bytes, inodes int64
	full          string
}

// useOf measures a layer: a tmpfs by its counters, whose limits the kernel
// enforces; a guarded workspace's directory on disk (bound not nil) by a
// walk of its upper directory, which stops once past the bound.
func useOf(layer *os.File, bound *Layer) (layerUse, error) {
	if bound != nil && bound.Dir != "" {
		return diskUse(layer, bound)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(layer.Fd()), &st); err != nil {
		return layerUse{}, err
	}
	u := layerUse{bytes: int64(st.Blocks-st.Bfree) * st.Bsize, inodes: int64(st.Files-st.Ffree) - layerSlack}
	switch {
	case st.Bfree == 0:
		u.full = "workspace_size"
	case st.Ffree == 0:
		u.full = "workspace_inodes"
	}
	return u, nil
}

// layerSlack is what the layer's tmpfs holds for itself (see nsinit).
const layerSlack = 4

// watchLayer ends the run when the sandbox has filled its layer, checking
// until stop is closed. A tmpfs already refuses the write (ENOSPC), and
// cordon reports the limit rather than leave the command to say so in its
// own words, or not at all. A layer on disk is measured by what its file
// system lost every layerEvery, and by a walk of its names no more often
// than every diskEvery nor than twenty times as long as the last walk took,
// so that walking costs the run a twentieth of a core at most; what the
// sandbox writes between two walks is past the limit until the next.
func watchLayer(layer *os.File, bound *Layer, lim *limiter, stop <-chan struct{}) {
	disk := bound != nil && bound.Dir != ""
	t := time.NewTicker(layerEvery)
	defer t.Stop()
	var walked time.Time
	wait := diskEvery
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if !disk {
				if u, err := useOf(layer, bound); err == nil && u.full != "" {
					lim.trip(u.full)
					return
				}
				continue
			}
			if time.Since(walked) < wait {
				if u, past := fsUse(layer, bound); past {
					lim.trip(u.full)
					return
				}
				continue
			}
			began := time.Now()
			if u, err := diskUse(layer, bound); err == nil && u.full != "" { // fsUse first
				lim.trip(u.full)
				return
			}
			walked, wait = time.Now(), max(diskEvery, 20*time.Since(began))
		}
	}
}

// diskEvery is how often, at most, a layer on disk is walked.
const diskEvery = 500 * time.Millisecond

// keepChanges, once the sandbox has ended, records how much of the layer
// was used, reports a full one, and hands it to opts.Review.
func keepChanges(opts Options, res *Result, lim *limiter, layer *os.File, bound *Layer) {
	if layer == nil {
		res.changes = &outcome.Changes{Error: "the sandbox ended before its workspace layer was in place: nothing to keep"}
		return
	}
	defer layer.Close()
	u, err := useOf(layer, bound)
	if err == nil {
		lim.layer = &u
		if u.full != "" {
			lim.trip(u.full)
		}
	}
	if opts.Review == nil {
		res.changes = &outcome.Changes{Error: "no place was given to keep the changes: they are dropped"}
		return
	}
	if k := lim.tripped(); bound != nil && bound.Dir != "" && (k == "workspace_size" || k == "workspace_inodes") {
		// A guarded workspace lands what it holds: not what a run past
		// its limit left, however far past it got before it was ended.
		res.changes = &outcome.Changes{Error: fmt.Sprintf("the run was ended past the workspace's %s limit: nothing of it lands (the host's workspace is untouched)", strings.TrimPrefix(k, "workspace_"))}
		return
	}
	c, err := opts.Review(layer)
	if c == nil {
		c = &outcome.Changes{}
	}
	if err != nil {
		c.Error = err.Error()
	}
	res.changes = c
}
