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
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/protect"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// fileOp runs, inside the sandbox (`cordon __file OP PATH [ARG]`), one of
// the operations on names: stat (the entry, as a listing describes it,
// written as JSON), remove (a file, a link or an empty directory; with
// ARG "recursive", a directory and everything in it), rename (to ARG, an
// absolute path) and mkdir (with its parents; JSON {"created": bool}).
// cordon's placeholders (hidden: their identities, wire.ReadPlaceholders)
// are no entries: stat does not find them, and they are neither removed
// nor renamed.
func fileOp(op, p string, args []string, hidden map[protect.ID]bool, w io.Writer) error {
	placeholder := func(p string) bool {
		var st unix.Stat_t
		return unix.Lstat(p, &st) == nil && hidden[protect.ID{Dev: st.Dev, Ino: st.Ino}]
	}
	if placeholder(p) {
		return fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	switch op {
	case "stat":
		dir, name := path.Split(p)
		d, err := os.Open(dir)
		if err != nil {
			return err
		}
		defer d.Close()
		if name == "" { // "/"
			name = "."
		}
		var st unix.Stat_t
		if err := unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &fs.PathError{Op: "stat", Path: p, Err: err}
		}
		return json.NewEncoder(w).Encode(dirEntry(int(d.Fd()), name, &st))
	case "remove":
		if len(args) == 1 && args[0] == "recursive" {
			return removeAll(p, placeholder)
		}
		return os.Remove(p)
	case "rename":
		if len(args) != 1 || !path.IsAbs(args[0]) {
			return fmt.Errorf("rename: want the new absolute path: %w", errUsage)
		}
		if placeholder(args[0]) {
			return fmt.Errorf("%s: %w", args[0], fs.ErrPermission)
		}
		// Nor is a tree that holds one moved (in a sandbox, a placeholder
		// is a mount, and the kernel refuses that too).
		if err := holdsPlaceholder(p, placeholder); err != nil {
			return err
		}
		return os.Rename(p, args[0])
	case "mkdir":
		_, err := os.Lstat(p)
		created := errors.Is(err, fs.ErrNotExist)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		return json.NewEncoder(w).Encode(map[string]bool{"created": created})
	}
	return fmt.Errorf("unknown operation %q: %w", op, errUsage)
}

// removeAll removes p and what is under it, never following a link, and
// refuses a tree that holds a placeholder (what the sandbox sees in place
// of a protected path: it cannot be removed, and is not the sandbox's).
func removeAll(p string, placeholder func(string) bool) error {
	if err := holdsPlaceholder(p, placeholder); err != nil {
		return err
	}
	if _, err := os.Lstat(p); err != nil {
		return err
	}
	return os.RemoveAll(p)
}

// holdsPlaceholder is an error when p, or anything under it (links not
// followed), is a placeholder.
func holdsPlaceholder(p string, placeholder func(string) bool) error {
	var held error
	err := walkNoFollow(p, func(q string) {
		if held == nil && placeholder(q) {
			held = fmt.Errorf("%s holds %s, which cordon protects: %w", p, q, fs.ErrPermission)
		}
	})
	if err != nil {
		return err
	}
	return held
}

// walkNoFollow calls f on p and every path under it, links not followed.
func walkNoFollow(p string, f func(string)) error {
	f(p)
	st, err := os.Lstat(p)
	if err != nil || !st.IsDir() {
		return err
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := walkNoFollow(path.Join(p, e.Name()), f); err != nil {
			return err
		}
	}
	return nil
}

// fileOpRoutes are the operations on a sandbox's names.
func (s *Server) fileOpRoutes() {
	s.handle("GET "+api.Version+"/sandboxes/{id}/files/stat", agentOnly, s.statFile)
	s.handle("DELETE "+api.Version+"/sandboxes/{id}/files", agentOnly, s.removeFile)
	s.handle("POST "+api.Version+"/sandboxes/{id}/files/rename", agentOnly, s.renameFile)
	s.handle("POST "+api.Version+"/sandboxes/{id}/files/mkdir", agentOnly, s.makeDir)
	s.handle("GET "+api.Version+"/sandboxes/{id}/files/watch", agentOnly, s.watchFiles)
}

// runFileOp runs `cordon __file ARGS...` in e as a step of kind, recorded
// as action, and answers with answer(stdout) when it succeeded.
func (s *Server) runFileOp(w http.ResponseWriter, r *http.Request, c caller, kind, action, verb string, args []string, answer func(p string, out []byte) (any, error)) int {
	e, p, release, status := s.fileTarget(w, r, c)
	if e == nil {
		return status
	}
	defer release()
	if status := s.fileStep(w, r, c, e, p, kind, action, nil); status != 0 {
		return status
	}
	stdout, stderr := &cappedBuffer{max: 64 << 10}, &cappedBuffer{max: 4 << 10}
	argv := append([]string{"cordon", FileArg, args[0], p}, args[1:]...)
	o, err := e.box.Exec(r.Context(), sandbox.ExecOptions{Args: argv, SelfExec: true, Stdout: stdout, Stderr: stderr})
	if err == nil && kind == "files.write" {
		s.landAfter(e, c.name())
	}
	switch {
	case err != nil:
		status = fail(w, http.StatusConflict, "%s", execError(e, err))
	case o.Status != outcome.OK:
		status = fail(w, fileStatus(o), "%s %s in sandbox %s: %s", verb, p, e.id, fileMessage(o, stderr.String()))
	case stdout.over:
		status = fail(w, http.StatusBadGateway, "%s %s in sandbox %s: the sandbox sent more than %d bytes", verb, p, e.id, stdout.max)
	default:
		ans, aerr := answer(p, stdout.Bytes())
		if aerr != nil {
			status = fail(w, http.StatusBadGateway, "%s %s in sandbox %s: the sandbox's answer was refused: %v", verb, p, e.id, aerr)
			break
		}
		status = reply(w, http.StatusOK, ans)
	}
	s.afterStep(e, c, kind, p, &o, err, status, map[string]any{"operation": args[0]})
	return status
}

// statFile describes one entry, as a listing would (a link not followed).
func (s *Server) statFile(w http.ResponseWriter, r *http.Request, c caller) int {
	return s.runFileOp(w, r, c, "files.read", "file_stat", "describing", []string{"stat"}, func(p string, out []byte) (any, error) {
		var e api.DirEntry
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, err
		}
		if e.Type == "" {
			return nil, errors.New("no type")
		}
		return api.FileInfo{DirEntry: e, Path: p}, nil
	})
}

// removeFile removes a file, a link or an empty directory; with
// recursive=1, a directory and everything in it.
func (s *Server) removeFile(w http.ResponseWriter, r *http.Request, c caller) int {
	args := []string{"remove"}
	switch r.URL.Query().Get("recursive") {
	case "", "0", "false":
	case "1", "true":
		args = append(args, "recursive")
	default:
		return fail(w, http.StatusBadRequest, "recursive: want 1 or 0, found %q", r.URL.Query().Get("recursive"))
	}
	return s.runFileOp(w, r, c, "files.write", "file_remove", "removing", args, func(p string, _ []byte) (any, error) {
		return map[string]string{"path": p}, nil
	})
}

// renameFile renames path to the query's to, inside the sandbox.
func (s *Server) renameFile(w http.ResponseWriter, r *http.Request, c caller) int {
	to := r.URL.Query().Get("to")
	if !path.IsAbs(to) || strings.ContainsRune(to, 0) {
		return fail(w, http.StatusBadRequest, "to: want an absolute path inside the sandbox, found %q", to)
	}
	return s.runFileOp(w, r, c, "files.write", "file_rename", "renaming", []string{"rename", to}, func(p string, _ []byte) (any, error) {
		return map[string]string{"path": to, "from": p}, nil
	})
}

// makeDir makes a directory and its parents; created says whether it is
// new.
func (s *Server) makeDir(w http.ResponseWriter, r *http.Request, c caller) int {
	return s.runFileOp(w, r, c, "files.write", "file_mkdir", "making", []string{"mkdir"}, func(p string, out []byte) (any, error) {
		var a struct {
			Created bool `json:"created"`
		}
		if err := json.Unmarshal(out, &a); err != nil {
			return nil, err
		}
		return map[string]any{"path": p, "created": a.Created}, nil
	})
}
