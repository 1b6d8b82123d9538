package server

import (
	"bytes"
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
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/protect"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// Bounds of a directory listing: entries (listDefault unless the request
// asks for fewer or more, up to listMax), and the bytes of its JSON as the
// sandbox sends it, past which the listing is cut.
const (
	listDefault  = 1000
	listMax      = 10000
	listMaxBytes = 4 << 20
)

// listDir writes, as JSON, the listing of the directory p inside the
// sandbox: at most max entries and listMaxBytes of JSON, each entry
// described by lstat (a symlink is never followed; its target is read as
// text); cordon's placeholders (see wire.PlaceholdersFile) are left out.
// It runs inside the sandbox (`cordon __file list`).
func listDir(p string, max int, w io.Writer) error {
	hidden := wire.ReadPlaceholders()
	d, err := os.Open(p)
	if err != nil {
		return err
	}
	defer d.Close()
	if st, err := d.Stat(); err != nil {
		return err
	} else if !st.IsDir() {
		return fmt.Errorf("%s is not a directory: %w", p, fs.ErrInvalid)
	}
	fd := int(d.Fd())
	out := api.DirListing{Entries: []api.DirEntry{}}
	size := 0
	for !out.Truncated {
		names, rerr := d.Readdirnames(256)
		for _, name := range names {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
				continue // removed since it was read
			} else if err != nil {
				return fmt.Errorf("%s/%s: %w", p, name, err)
			}
			if hidden[protect.ID{Dev: st.Dev, Ino: st.Ino}] {
				continue
			}
			e := dirEntry(fd, name, &st)
			b, _ := json.Marshal(e)
			if len(out.Entries) == max || size+len(b) > listMaxBytes {
				out.Truncated = true
				break
			}
			size += len(b) + 1
			out.Entries = append(out.Entries, e)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	slices.SortFunc(out.Entries, func(a, b api.DirEntry) int { return strings.Compare(rawName(a), rawName(b)) })
	return json.NewEncoder(w).Encode(out)
}

// dirEntry describes the entry name of the directory fd from its lstat.
func dirEntry(fd int, name string, st *unix.Stat_t) api.DirEntry {
	e := api.DirEntry{Size: st.Size, Mode: fmt.Sprintf("%04o", st.Mode&0o7777), Modified: time.Unix(st.Mtim.Unix()).UTC()}
	e.Name, e.NameBase64 = textOf(name)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		e.Type = "file"
	case unix.S_IFDIR:
		e.Type = "dir"
	case unix.S_IFLNK:
		e.Type = "symlink"
		buf := make([]byte, unix.PathMax)
		if n, err := unix.Readlinkat(fd, name, buf); err == nil {
			e.Target, e.TargetBase64 = textOf(string(buf[:n]))
		}
	default:
		e.Type = "other"
	}
	return e
}

// textOf is a name as JSON carries it: text, and the exact bytes when they
// are not UTF-8.
func textOf(s string) (string, []byte) {
	if utf8.ValidString(s) {
		return s, nil
	}
	return strings.ToValidUTF8(s, "\uFFFD"), []byte(s)
}

// rawName is an entry's name as bytes.
func rawName(e api.DirEntry) string {
	if e.NameBase64 != nil {
		return string(e.NameBase64)
	}
	return e.Name
}

// parseListing reads what `cordon __file list` wrote inside a sandbox,
// which the sandbox may have forged: one JSON value, at most max entries,
// each with a name that is one path component, a known type, and text that
// agrees with its bytes. Anything else is refused whole.
func parseListing(b []byte, max int) (api.DirListing, error) {
	var l api.DirListing
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return api.DirListing{}, fmt.Errorf("not a listing: %w", err)
	}
	if dec.More() {
		return api.DirListing{}, errors.New("not a listing: more than one JSON value")
	}
	if len(l.Entries) > max {
		return api.DirListing{}, fmt.Errorf("%d entries, over the %d asked for", len(l.Entries), max)
	}
	if l.Entries == nil {
		l.Entries = []api.DirEntry{}
	}
	for i, e := range l.Entries {
		name := rawName(e)
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > 255 {
			return api.DirListing{}, fmt.Errorf("entry %d: %q is not a name", i, name)
		}
		if !agrees(e.Name, e.NameBase64) || !agrees(e.Target, e.TargetBase64) {
			return api.DirListing{}, fmt.Errorf("entry %d: its text and its bytes differ", i)
		}
		if e.Type != "symlink" && (e.Target != "" || e.TargetBase64 != nil) {
			return api.DirListing{}, fmt.Errorf("entry %d: a target for a %s", i, e.Type)
		}
		switch e.Type {
		case "file", "dir", "symlink", "other":
		default:
			return api.DirListing{}, fmt.Errorf("entry %d: type %q", i, e.Type)
		}
		if m, err := strconv.ParseUint(e.Mode, 8, 32); err != nil || m&^0o7777 != 0 || e.Size < 0 {
			return api.DirListing{}, fmt.Errorf("entry %d: mode %q, size %d", i, e.Mode, e.Size)
		}
	}
	return l, nil
}

// agrees reports whether text is what textOf gives for raw (nil raw: text
// is UTF-8 itself).
func agrees(text string, raw []byte) bool {
	if raw == nil {
		return utf8.ValidString(text)
	}
	t, b := textOf(string(raw))
	return b != nil && t == text
}

// listMaxOf reads the max parameter of a listing request.
func listMaxOf(r *http.Request) (int, error) {
	v := r.URL.Query().Get("max")
	if v == "" {
		return listDefault, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > listMax {
		return 0, fmt.Errorf("max: want a number of entries from 1 to %d, found %q", listMax, v)
	}
	return n, nil
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request, c caller) int {
	max, err := listMaxOf(r)
	if err != nil {
		return fail(w, http.StatusBadRequest, "%v", err)
	}
	e, p, release, status := s.fileTarget(w, r, c)
	if e == nil {
		return status
	}
	defer release()
	if status := s.fileStep(w, r, c, e, p, "files.list", "file_list", nil); status != 0 {
		return status
	}
	stdout, stderr := &cappedBuffer{max: listMaxBytes + 64<<10}, &cappedBuffer{max: 4 << 10}
	o, err := e.box.Exec(r.Context(), sandbox.ExecOptions{Args: []string{"cordon", FileArg, "list", p, strconv.Itoa(max)}, SelfExec: true, Stdout: stdout, Stderr: stderr})
	var l api.DirListing
	switch {
	case err != nil:
		status = fail(w, http.StatusConflict, "%s", execError(e, err))
	case o.Status != outcome.OK:
		status = fail(w, fileStatus(o), "listing %s in sandbox %s: %s", p, e.id, fileMessage(o, stderr.String()))
	case stdout.over:
		status = fail(w, http.StatusBadGateway, "listing %s in sandbox %s: the sandbox sent more than %d bytes", p, e.id, stdout.max)
	default:
		if l, err = parseListing(stdout.Bytes(), max); err != nil {
			status = fail(w, http.StatusBadGateway, "listing %s in sandbox %s: the sandbox's answer was refused: %v", p, e.id, err)
			break
		}
		l.Path = p
		status = reply(w, http.StatusOK, l)
	}
	s.afterStep(e, c, "files.list", p, &o, err, status, map[string]any{"entries": len(l.Entries), "truncated": l.Truncated})
	return status
}

// cappedBuffer keeps the first max bytes written to it and notes that more
// came; writes never fail, so that the command's output is still counted.
type cappedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.over = true
		b.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// errUsage is a hidden subcommand called with arguments it does not take.
var errUsage = errors.New("usage: __file list /DIR MAX | tar-out /DIR | tar-in /DIR")

// dirOp runs the directory operations of FileMain inside the sandbox.
func dirOp(op, p string, args []string) error {
	switch {
	case op == "list" && len(args) == 1:
		max, err := strconv.Atoi(args[0])
		if err != nil || max < 1 || max > listMax {
			return errUsage
		}
		return listDir(p, max, os.Stdout)
	case (op == "tar-out" || op == "tar-in") && len(args) == 0:
		return tarMain(op, p)
	}
	return errUsage
}

// dirRoutes registers the endpoints beyond commands and files: a
// directory's listing, tar streams in and out, the terminal, the ports.
func (s *Server) dirRoutes() {
	s.handle("GET "+api.Version+"/sandboxes/{id}/files/list", agentOnly, s.listFiles)
	s.handle("GET "+api.Version+"/sandboxes/{id}/files/tar", agentOnly, s.tarDownload)
	s.handle("PUT "+api.Version+"/sandboxes/{id}/files/tar", agentOnly, s.tarUpload)
	s.handle("GET "+api.Version+"/sandboxes/{id}/terminal", agentOnly, s.terminal)
	s.portRoutes()
}
