package server

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/protect"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// Bounds of a tar stream into or out of a sandbox, besides the profile's
// own limits (file_size and tmp_size hold for what is extracted; output
// for what is archived): entries, the bytes of the stream, and how deep
// directories nest. Variables for the tests.
var (
	tarMaxEntries int64 = 100000
	tarMaxBytes   int64 = 1 << 30
	tarMaxDepth         = 128
)

// tarSummary is what tar-in and tar-out report of their work: on stdout
// after extracting, on the last line of stderr after archiving.
type tarSummary struct {
	Entries int64 `json:"entries"`
	Bytes   int64 `json:"bytes"`
	// Skipped counts what tar-out left out: devices, FIFOs, sockets.
	Skipped int64 `json:"skipped,omitempty"`
}

// errFileTooBig is EFBIG as the C library words it, which the outcome reads
// as the file_size limit.
var errFileTooBig = errors.New("File too large")

// tarOut writes the directory p as a tar stream to w, from inside the
// sandbox: every directory is opened relative to its parent, never through
// a symlink; a symlink is archived as a link with its target; a regular
// file's content is read through a descriptor opened with O_NOFOLLOW;
// devices, FIFOs and sockets are left out (counted as skipped). Names are
// relative to p, directories ending in "/".
func tarOut(p string, w io.Writer, log io.Writer) (tarSummary, error) {
	var sum tarSummary
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return sum, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	tw := tar.NewWriter(w)
	err = tarDir(tw, fd, "", 0, &sum, log, wire.ReadPlaceholders())
	if err == nil {
		err = tw.Close()
	}
	return sum, err
}

// tarDir archives the entries of the directory dirfd (which it closes),
// named under prefix, leaving out cordon's placeholders (hidden).
func tarDir(tw *tar.Writer, dirfd int, prefix string, depth int, sum *tarSummary, log io.Writer, hidden map[protect.ID]bool) error {
	d := os.NewFile(uintptr(dirfd), prefix)
	defer d.Close()
	if depth > tarMaxDepth {
		return fmt.Errorf("%s: directories nest deeper than %d", prefix, tarMaxDepth)
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("reading %s: %w", prefix, err)
	}
	slices.Sort(names)
	for _, name := range names {
		if sum.Entries++; sum.Entries > tarMaxEntries {
			return fmt.Errorf("more than %d entries", tarMaxEntries)
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
			sum.Entries--
			continue
		} else if err != nil {
			return fmt.Errorf("%s%s: %w", prefix, name, err)
		}
		if hidden[protect.ID{Dev: st.Dev, Ino: st.Ino}] {
			sum.Entries--
			continue
		}
		hdr := &tar.Header{Name: prefix + name, Mode: int64(st.Mode & 0o7777), ModTime: time.Unix(st.Mtim.Unix()), Uid: int(st.Uid), Gid: int(st.Gid)}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
			sub, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
			if err := tw.WriteHeader(hdr); err != nil {
				unix.Close(sub)
				return err
			}
			if err := tarDir(tw, sub, hdr.Name, depth+1, sum, log, hidden); err != nil {
				return err
			}
		case unix.S_IFLNK:
			buf := make([]byte, unix.PathMax)
			n, err := unix.Readlinkat(dirfd, name, buf)
			if err != nil {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, string(buf[:n])
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		case unix.S_IFREG:
			if err := tarFile(tw, dirfd, name, hdr, sum); err != nil {
				return err
			}
		default:
			sum.Entries--
			if sum.Skipped++; sum.Skipped <= 20 {
				fmt.Fprintf(log, "%s: left out (not a file, directory or symlink)\n", hdr.Name)
			}
		}
	}
	return nil
}

// tarFile archives one regular file, its size as it is once opened.
func tarFile(tw *tar.Writer, dirfd int, name string, hdr *tar.Header, sum *tarSummary) error {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", hdr.Name, err)
	}
	f := os.NewFile(uintptr(fd), hdr.Name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s: changed while it was archived", hdr.Name)
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
	if sum.Bytes += st.Size; sum.Bytes > tarMaxBytes {
		return fmt.Errorf("more than %d bytes of files", tarMaxBytes)
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	// A file that shrank meanwhile is padded with zeros, one that grew is
	// cut: the header said its size.
	n, err := io.Copy(tw, io.LimitReader(f, st.Size))
	if err != nil {
		return fmt.Errorf("%s: %w", hdr.Name, err)
	}
	if n < st.Size {
		_, err = io.CopyN(tw, zeros{}, st.Size-n)
	}
	return err
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// tarIn extracts the tar stream r into the existing directory p, from
// inside the sandbox. Entry names are relative: an absolute name or one
// with a ".." component is refused. Every directory on the way is opened
// relative to its parent with O_NOFOLLOW, so no symlink, in the archive or
// already there, is ever followed; a file or link replaces a symlink of
// its name, not what it points at. Symlinks are created as links, hard
// links only to an entry under p; devices, FIFOs and other types are
// refused. Permission bits are kept (setuid, setgid and sticky are not),
// file times too. At most tarMaxEntries entries and tarMaxBytes of stream.
func tarIn(p string, r io.Reader) (tarSummary, error) {
	var sum tarSummary
	root, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return sum, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(root)
	lr := &io.LimitedReader{R: r, N: tarMaxBytes + 1}
	tr := tar.NewReader(lr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return sum, nil
		}
		if lr.N <= 0 {
			return sum, fmt.Errorf("the archive is over %d bytes", tarMaxBytes)
		}
		if err != nil {
			return sum, fmt.Errorf("reading the archive after %d entries: %w", sum.Entries, err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if sparse(hdr) {
			// A few bytes of archive would write a file of any size.
			return sum, fmt.Errorf("%q: sparse files are refused", hdr.Name)
		}
		if sum.Entries++; sum.Entries > tarMaxEntries {
			return sum, fmt.Errorf("the archive has more than %d entries", tarMaxEntries)
		}
		n, err := extract(root, hdr, tr)
		sum.Bytes += n
		if lr.N <= 0 {
			return sum, fmt.Errorf("the archive is over %d bytes", tarMaxBytes)
		}
		if sum.Bytes > tarMaxBytes {
			return sum, fmt.Errorf("the archive's files are over %d bytes", tarMaxBytes)
		}
		if err != nil {
			return sum, fmt.Errorf("%q: %w", hdr.Name, err)
		}
	}
}

// sparse says whether an entry is a sparse file (old GNU, or a PAX
// GNU.sparse record).
func sparse(hdr *tar.Header) bool {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// tarName splits an entry's name into its components, refusing what would
// leave the directory.
func tarName(name string) ([]string, error) {
	if strings.HasPrefix(name, "/") {
		return nil, errors.New("an absolute name")
	}
	var parts []string
	for _, c := range strings.Split(name, "/") {
		switch c {
		case "", ".":
		case "..":
			return nil, errors.New("a name with ..")
		default:
			parts = append(parts, c)
		}
	}
	if len(parts) == 0 {
		return nil, errors.New("an empty name")
	}
	if len(parts) > tarMaxDepth {
		return nil, fmt.Errorf("deeper than %d directories", tarMaxDepth)
	}
	return parts, nil
}

// walk opens the parent directory of the entry named by parts under root,
// every step relative to the last with O_NOFOLLOW; with create, missing
// directories are made. The caller closes the descriptor.
func walk(root int, parts []string, create bool) (int, error) {
	fd, err := unix.Dup(root)
	if err != nil {
		return -1, err
	}
	for _, c := range parts[:len(parts)-1] {
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdirat(fd, c, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		unix.Close(fd)
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, fmt.Errorf("%s is not a directory (a symlink is not followed): %w", c, fs.ErrInvalid)
		}
		if err != nil {
			return -1, fmt.Errorf("%s: %w", c, err)
		}
		fd = next
	}
	return fd, nil
}

// extract creates one entry under root and returns the bytes of file
// content it wrote.
func extract(root int, hdr *tar.Header, r io.Reader) (int64, error) {
	parts, err := tarName(hdr.Name)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", err, fs.ErrInvalid)
	}
	parent, err := walk(root, parts, true)
	if err != nil {
		return 0, err
	}
	defer unix.Close(parent)
	last := parts[len(parts)-1]
	mode := uint32(hdr.Mode & 0o777)
	switch hdr.Typeflag {
	case tar.TypeDir:
		err := unix.Mkdirat(parent, last, mode)
		if errors.Is(err, unix.EEXIST) {
			var st unix.Stat_t
			if unix.Fstatat(parent, last, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				// Through a descriptor of the directory itself: a link
				// swapped in meanwhile is not followed.
				dfd, err := unix.Openat(parent, last, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil {
					return 0, err
				}
				defer unix.Close(dfd)
				return 0, unix.Fchmod(dfd, mode)
			}
			return 0, fmt.Errorf("exists and is not a directory: %w", fs.ErrInvalid)
		}
		return 0, err
	case tar.TypeReg:
		if err := replaceable(parent, last); err != nil {
			return 0, err
		}
		fd, err := unix.Openat(parent, last, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
		if err != nil {
			return 0, err
		}
		f := os.NewFile(uintptr(fd), last)
		n, err := io.Copy(f, r)
		if err == nil {
			// Past the umask, on the file written (not on whatever has
			// its name by now).
			unix.Fchmod(fd, mode)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if errors.Is(err, unix.EFBIG) {
			return n, errFileTooBig
		}
		if err == nil {
			ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
			unix.UtimesNanoAt(parent, last, ts, unix.AT_SYMLINK_NOFOLLOW)
		}
		return n, err
	case tar.TypeSymlink:
		if err := replaceable(parent, last); err != nil {
			return 0, err
		}
		if hdr.Linkname == "" || strings.ContainsRune(hdr.Linkname, 0) {
			return 0, fmt.Errorf("a symlink without a target: %w", fs.ErrInvalid)
		}
		return 0, unix.Symlinkat(hdr.Linkname, parent, last)
	case tar.TypeLink:
		target, err := tarName(hdr.Linkname)
		if err != nil {
			return 0, fmt.Errorf("a hard link to %w: %w", err, fs.ErrInvalid)
		}
		tparent, err := walk(root, target, false)
		if err != nil {
			return 0, err
		}
		defer unix.Close(tparent)
		if err := replaceable(parent, last); err != nil {
			return 0, err
		}
		// Flags 0: a link to a symlink links the symlink itself.
		return 0, unix.Linkat(tparent, target[len(target)-1], parent, last, 0)
	default:
		return 0, fmt.Errorf("entries of type %q (devices, FIFOs and the like) are not extracted: %w", hdr.Typeflag, fs.ErrInvalid)
	}
}

// replaceable removes what is at name in dir unless it is a directory, so
// that a file or a link takes its place (a symlink there is replaced, not
// followed).
func replaceable(dir int, name string) error {
	var st unix.Stat_t
	err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return err
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return fmt.Errorf("a directory is in the way: %w", fs.ErrInvalid)
	}
	return unix.Unlinkat(dir, name, 0)
}

// tarMain runs tar-out or tar-in inside the sandbox and reports the
// summary: tar-in on stdout, tar-out on the last line of stderr.
func tarMain(op, p string) error {
	if op == "tar-out" {
		sum, err := tarOut(p, os.Stdout, os.Stderr)
		if err == nil {
			b, _ := json.Marshal(sum)
			fmt.Fprintf(os.Stderr, "%s\n", b)
		}
		return err
	}
	sum, err := tarIn(p, os.Stdin)
	b, _ := json.Marshal(sum)
	fmt.Fprintf(os.Stdout, "%s\n", b)
	return err
}

// Trailers of a tar download: the entries and bytes of files archived,
// and, when the archive was cut after its first bytes, why.
const (
	trailerEntries = "Cordon-Tar-Entries"
	trailerBytes   = "Cordon-Tar-Bytes"
	trailerError   = "Cordon-Tar-Error"
)

func (s *Server) tarDownload(w http.ResponseWriter, r *http.Request, c caller) int {
	e, p, release, status := s.fileTarget(w, r, c)
	if e == nil {
		return status
	}
	defer release()
	if status := s.fileStep(w, r, c, e, p, "files.read", "file_tar_out", nil); status != 0 {
		return status
	}
	w.Header().Set("Trailer", trailerEntries+", "+trailerBytes+", "+trailerError)
	// A client that stops reading cannot hold the command (see download).
	g := newSendGuard(w, s.cmdLimits.Send)
	defer g.done()
	body := &lazyBody{w: g, contentType: "application/x-tar"}
	stderr := &tailBuffer{max: 8 << 10}
	o, err := e.box.Exec(r.Context(), sandbox.ExecOptions{Args: []string{"cordon", FileArg, "tar-out", p}, SelfExec: true, Stdout: body, Stderr: stderr})
	sum, sumErr := parseSummary(stderr.lastLine())
	switch {
	case err != nil:
		status = fail(w, http.StatusConflict, "%s", execError(e, err))
	case o.Status == outcome.OK && sumErr == nil:
		status = body.finish()
		w.Header().Set(trailerEntries, strconv.FormatInt(sum.Entries, 10))
		w.Header().Set(trailerBytes, strconv.FormatInt(sum.Bytes, 10))
	case body.started():
		// The status was sent with the first bytes: the archive is cut
		// short (it has no end marker), and the trailer says why.
		status = http.StatusOK
		w.Header().Set(trailerError, headerSafe(fileMessage(o, stderr.String())))
	case o.Status == outcome.OK:
		status = fail(w, http.StatusBadGateway, "archiving %s in sandbox %s: the sandbox's summary was refused: %v", p, e.id, sumErr)
	default:
		status = fail(w, fileStatus(o), "archiving %s in sandbox %s: %s", p, e.id, fileMessage(o, stderr.String()))
	}
	s.afterStep(e, c, "files.read", p, &o, err, status, map[string]any{"archive": "tar", "archive_bytes": body.n, "entries": sum.Entries, "bytes": sum.Bytes, "skipped": sum.Skipped})
	return status
}

func (s *Server) tarUpload(w http.ResponseWriter, r *http.Request, c caller) int {
	e, p, release, status := s.fileTarget(w, r, c)
	if e == nil {
		return status
	}
	defer release()
	// Known whole before the step is decided, as an upload (see upload):
	// an approver sees the archive's size, digest and beginning, and the
	// sandbox is fed exactly that.
	spooled, status := s.spoolBody(w, r, tarMaxBytes, "the archive")
	if spooled == nil {
		return status
	}
	defer spooled.Close()
	if status := s.fileStep(w, r, c, e, p, "files.write", "file_tar_in", &spooled.content); status != 0 {
		return status
	}
	counted := &countingReader{r: spooled.reader()}
	stdout, stderr := &cappedBuffer{max: 4 << 10}, &cappedBuffer{max: 8 << 10}
	o, err := e.box.Exec(r.Context(), sandbox.ExecOptions{Args: []string{"cordon", FileArg, "tar-in", p}, SelfExec: true, Stdin: counted, Stdout: stdout, Stderr: stderr})
	sum, sumErr := parseSummary(stdout.String())
	n := counted.n.Load()
	var landed *outcome.Changes
	if err == nil {
		landed = s.landAfter(e, c.name())
	}
	switch {
	case err != nil:
		status = fail(w, http.StatusConflict, "%s", execError(e, err))
	case n > tarMaxBytes:
		status = fail(w, http.StatusRequestEntityTooLarge, "extracting into %s in sandbox %s: the archive is over %d bytes; %d entries were extracted", p, e.id, tarMaxBytes, sum.Entries)
	case o.Status == outcome.OK && sumErr == nil:
		status = reply(w, http.StatusOK, api.TarResult{Path: p, Entries: sum.Entries, Bytes: sum.Bytes, ArchiveBytes: n, Changes: landed})
	case o.Status == outcome.OK:
		status = fail(w, http.StatusBadGateway, "extracting into %s in sandbox %s: the sandbox's summary was refused: %v", p, e.id, sumErr)
	default:
		status = fail(w, fileStatus(o), "extracting into %s in sandbox %s: %s (%d entries were extracted)", p, e.id, fileMessage(o, stderr.String()), sum.Entries)
	}
	s.afterStep(e, c, "files.write", p, &o, err, status, map[string]any{"archive": "tar", "archive_bytes": n, "entries": sum.Entries, "bytes": sum.Bytes})
	return status
}

// parseSummary reads the summary a tar operation inside the sandbox sent,
// which the sandbox may have forged: counts within the bounds.
func parseSummary(line string) (tarSummary, error) {
	var sum tarSummary
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sum); err != nil || dec.More() {
		return tarSummary{}, fmt.Errorf("not a summary: %q", line)
	}
	if sum.Entries < 0 || sum.Entries > tarMaxEntries || sum.Bytes < 0 || sum.Bytes > tarMaxBytes || sum.Skipped < 0 {
		return tarSummary{}, fmt.Errorf("counts out of bounds: %+v", sum)
	}
	return sum, nil
}

// headerSafe makes text fit a header's value: printable ASCII, bounded.
func headerSafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	if len(b) > 512 {
		b = b[:512]
	}
	return string(b)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// lastLine is the last complete line written.
func (t *tailBuffer) lastLine() string {
	s := strings.TrimSuffix(t.String(), "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
