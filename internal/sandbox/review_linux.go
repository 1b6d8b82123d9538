package sandbox

import (
	"os"
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
// layer's root once init sent it, or nil when init ended without.
func layerSocket() (peer *os.File, got <-chan *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	ours := os.NewFile(uintptr(fds[0]), "layer socket")
	ch := make(chan *os.File, 1)
	go func() {
		defer ours.Close()
		f, err := wire.RecvFD(ours)
		if err != nil || !isLayer(f) {
			if f != nil {
				f.Close()
			}
			f = nil
		}
		ch <- f
	}()
	return os.NewFile(uintptr(fds[1]), "layer socket"), ch, nil
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

func useOf(layer *os.File) (layerUse, error) {
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
// until stop is closed: the tmpfs already refuses the write (ENOSPC), and
// cordon reports the limit rather than leave the command to say so in its
// own words, or not at all.
func watchLayer(layer *os.File, lim *limiter, stop <-chan struct{}) {
	t := time.NewTicker(layerEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if u, err := useOf(layer); err == nil && u.full != "" {
				lim.trip(u.full)
				return
			}
		}
	}
}

// keepChanges, once the sandbox has ended, records how much of the layer
// was used, reports a full one, and hands it to opts.Review.
func keepChanges(opts Options, res *Result, lim *limiter, layer *os.File) {
	if layer == nil {
		res.changes = &outcome.Changes{Error: "the sandbox ended before its workspace layer was in place: nothing to keep"}
		return
	}
	defer layer.Close()
	u, err := useOf(layer)
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
	c, err := opts.Review(layer)
	if c == nil {
		c = &outcome.Changes{}
	}
	if err != nil {
		c.Error = err.Error()
	}
	res.changes = c
}
