package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
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

// A watch streams the changes under a directory of a sandbox, a JSON
// object per line (api.FileEvent), until the client goes, the directory
// goes, or the watch's command ends (its sandbox's end, its wall limit).
// Like every file operation it runs inside the sandbox (`cordon __file
// watch /DIR [recursive]`), with inotify, as the sandbox's user: it sees
// what a command of the sandbox could, and spends the sandbox's own share
// of inotify instances and watches.
// maxWatchDirs bounds the directories one watch follows: a tree with more
// is refused; one that grows past it loses events, said by an "overflow".
var maxWatchDirs = 8192

const (
	// maxEventLine bounds a line of the watch as the sandbox sends it: a
	// name of PATH_MAX bytes, escaped, and its bytes in base64.
	maxEventLine = 64 << 10
	// watchReady is the line the watch sends once it is in place.
	watchReady = `{"type":"ready"}`
)

// eventTypes are the types of api.FileEvent a watch sends from inside.
var eventTypes = map[string]bool{"create": true, "write": true, "remove": true, "rename": true, "chmod": true, "overflow": true}

// watchDir writes, a line each, the changes under the directory p (and
// its subdirectories, when recursive): first watchReady, once the watches
// are in place. It returns when p is removed or moved, or when w fails.
// Links are never followed below p; cordon's placeholders (hidden) are
// neither reported nor entered.
func watchDir(p string, recursive bool, hidden map[protect.ID]bool, w io.Writer) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory: %w", p, fs.ErrInvalid)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("watching %s: %w", p, err)
	}
	defer unix.Close(fd)
	wt := &watcher{fd: fd, root: p, recursive: recursive, hidden: hidden, dirs: map[int]string{}, out: bufio.NewWriter(w)}
	if err := wt.add(""); err != nil {
		return err
	}
	if recursive {
		if err := wt.walk("", false); err != nil {
			return err
		}
	}
	wt.out.WriteString(watchReady + "\n")
	if err := wt.out.Flush(); err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("watching %s: %w", p, err)
		}
		if done := wt.events(buf[:n]); done {
			return wt.out.Flush()
		}
		if err := wt.out.Flush(); err != nil {
			return err
		}
	}
}

// watcher holds one watch's inotify descriptor and the directories it
// follows, by watch descriptor: their paths relative to root.
type watcher struct {
	fd        int
	root      string
	recursive bool
	hidden    map[protect.ID]bool
	dirs      map[int]string
	rootWD    int
	out       *bufio.Writer
	// full says the tree outgrew maxWatchDirs; last is the line last
	// written, so that a burst of the same event is written once.
	full bool
	last string
}

const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_MOVED_FROM |
	unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_EXCL_UNLINK

// add watches the directory rel (relative to root; "" is root itself).
// Below root, a link is not followed.
func (wt *watcher) add(rel string) error {
	mask := uint32(watchMask)
	if rel != "" {
		mask |= unix.IN_DONT_FOLLOW | unix.IN_ONLYDIR
		if len(wt.dirs) >= maxWatchDirs {
			return fmt.Errorf("the tree holds more than %d directories; watch a smaller one: %w", maxWatchDirs, errTooManyDirs)
		}
	}
	wd, err := unix.InotifyAddWatch(wt.fd, path.Join(wt.root, rel), mask)
	if err != nil {
		return fmt.Errorf("watching %s: %w", path.Join(wt.root, rel), err)
	}
	if rel == "" {
		wt.rootWD = wd
	}
	wt.dirs[wd] = rel
	return nil
}

// errTooManyDirs is a tree of more than maxWatchDirs directories.
var errTooManyDirs = fmt.Errorf("too many directories: %w", fs.ErrInvalid)

// walk watches every directory under rel, links not followed and
// placeholders left out; with report, it reports each entry as made.
func (wt *watcher) walk(rel string, report bool) error {
	ents, err := os.ReadDir(path.Join(wt.root, rel))
	if err != nil {
		return nil // gone meanwhile, or not the sandbox's to read
	}
	for _, e := range ents {
		sub := path.Join(rel, e.Name())
		if wt.placeholder(sub) {
			continue
		}
		if report {
			wt.emit(wt.event("create", sub, e.IsDir()))
		}
		if !e.IsDir() {
			continue
		}
		if err := wt.add(sub); errors.Is(err, errTooManyDirs) {
			return err
		} else if err != nil {
			continue // gone meanwhile
		}
		if err := wt.walk(sub, report); err != nil {
			return err
		}
	}
	return nil
}

// placeholder reports whether rel is one of cordon's placeholders.
func (wt *watcher) placeholder(rel string) bool {
	var st unix.Stat_t
	return unix.Lstat(path.Join(wt.root, rel), &st) == nil && wt.hidden[protect.ID{Dev: st.Dev, Ino: st.Ino}]
}

// forget stops following the directory rel and those under it (moved
// away: inotify would go on naming them by their old paths).
func (wt *watcher) forget(rel string) {
	for wd, d := range wt.dirs {
		if wd != wt.rootWD && (d == rel || strings.HasPrefix(d, rel+"/")) {
			unix.InotifyRmWatch(wt.fd, uint32(wd))
			delete(wt.dirs, wd)
		}
	}
}

// events writes the events in buf; done says the watched directory went.
func (wt *watcher) events(buf []byte) (done bool) {
	// A directory moved within the tree keeps its watches, under its new
	// path: the kernel queues the two halves of a move together, with one
	// cookie. One moved away is forgotten at the end of the batch.
	var movedFrom map[uint32]string
	defer func() {
		for _, rel := range movedFrom {
			wt.forget(rel)
		}
	}()
	for len(buf) >= unix.SizeofInotifyEvent {
		ev := unix.InotifyEvent{
			Wd:     int32(binary.NativeEndian.Uint32(buf[0:])),
			Mask:   binary.NativeEndian.Uint32(buf[4:]),
			Cookie: binary.NativeEndian.Uint32(buf[8:]),
			Len:    binary.NativeEndian.Uint32(buf[12:]),
		}
		size := unix.SizeofInotifyEvent + int(ev.Len)
		if size > len(buf) {
			return false
		}
		name := string(bytes.TrimRight(buf[unix.SizeofInotifyEvent:size], "\x00"))
		buf = buf[size:]
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			wt.emit(api.FileEvent{Type: "overflow"})
			continue
		}
		dir, known := wt.dirs[int(ev.Wd)]
		if !known {
			continue // a watch forgotten, its last events still queued
		}
		if ev.Mask&unix.IN_IGNORED != 0 {
			delete(wt.dirs, int(ev.Wd))
			if int(ev.Wd) == wt.rootWD {
				return true
			}
			continue
		}
		if int(ev.Wd) == wt.rootWD && ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
			typ := "remove"
			if ev.Mask&unix.IN_MOVE_SELF != 0 {
				typ = "rename"
			}
			wt.emit(api.FileEvent{Type: typ, Dir: true})
			// A directory moved is still watched: its watch is dropped
			// here; one removed is dropped by the kernel.
			return true
		}
		if ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
			continue // said by its parent's watch
		}
		rel := path.Join(dir, name)
		isDir := ev.Mask&unix.IN_ISDIR != 0
		var typ string
		switch {
		case ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
			typ = "create"
		case ev.Mask&unix.IN_DELETE != 0:
			typ = "remove"
		case ev.Mask&unix.IN_MOVED_FROM != 0:
			typ = "rename"
		case ev.Mask&unix.IN_MODIFY != 0:
			typ = "write"
		case ev.Mask&unix.IN_ATTRIB != 0:
			typ = "chmod"
		default:
			continue
		}
		if typ != "remove" && typ != "rename" && wt.placeholder(rel) {
			continue
		}
		wt.emit(wt.event(typ, rel, isDir))
		if !wt.recursive || !isDir {
			continue
		}
		switch {
		case ev.Mask&unix.IN_MOVED_FROM != 0:
			if movedFrom == nil {
				movedFrom = map[uint32]string{}
			}
			movedFrom[ev.Cookie] = rel
		case ev.Mask&unix.IN_MOVED_TO != 0 && movedFrom[ev.Cookie] != "":
			wt.move(movedFrom[ev.Cookie], rel)
			delete(movedFrom, ev.Cookie)
		case typ == "create":
			wt.grow(rel)
		}
	}
	return false
}

// event is the FileEvent of rel.
func (wt *watcher) event(typ, rel string, dir bool) api.FileEvent {
	e := api.FileEvent{Type: typ, Dir: dir}
	e.Name, e.NameBase64 = textOf(rel)
	return e
}

// move renames the directory from, and those under it, to to.
func (wt *watcher) move(from, to string) {
	for wd, d := range wt.dirs {
		if wd == wt.rootWD {
			continue
		}
		if d == from {
			wt.dirs[wd] = to
		} else if rest, ok := strings.CutPrefix(d, from+"/"); ok {
			wt.dirs[wd] = to + "/" + rest
		}
	}
}

// grow follows a directory that appeared under the tree (made, or moved
// in from outside it), and what is already in it: each entry found is
// reported as made, since it may have been made before the directory was
// followed (one made after may then be reported twice).
func (wt *watcher) grow(rel string) {
	if err := wt.add(rel); err != nil {
		if errors.Is(err, errTooManyDirs) {
			wt.overflowOnce()
		}
		return
	}
	if err := wt.walk(rel, true); errors.Is(err, errTooManyDirs) {
		wt.overflowOnce()
	}
}

// overflowOnce says, once, that the tree outgrew maxWatchDirs.
func (wt *watcher) overflowOnce() {
	if !wt.full {
		wt.full = true
		wt.emit(api.FileEvent{Type: "overflow"})
	}
}

// emit writes e as a line, unless it repeats the line before it (a write
// in many parts).
func (wt *watcher) emit(e api.FileEvent) {
	b, _ := json.Marshal(e)
	if string(b) == wt.last && e.Type == "write" {
		return
	}
	wt.last = string(b)
	wt.out.Write(b)
	wt.out.WriteByte('\n')
}

// eventStream is the watch's output as the server reads it: lines the
// sandbox wrote, each checked (the sandbox may forge them) and sent on to
// the client as an api.FileEvent. The answer's status and headers go out
// with the ready line; before it, nothing is sent.
type eventStream struct {
	g      *sendGuard
	cancel context.CancelFunc
	line   []byte
	ready  bool
	events int
	// refused says why the sandbox's output was refused: the watch ends.
	refused error
}

func (s *eventStream) Write(b []byte) (int, error) {
	n := len(b)
	sent := s.events
	defer func() {
		// What came in one write goes out in one flush.
		if s.events > sent {
			s.flush()
		}
	}()
	for len(b) > 0 && s.refused == nil {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			s.line = append(s.line, b...)
			if len(s.line) > maxEventLine {
				s.refuse(fmt.Errorf("a line of more than %d bytes", maxEventLine))
			}
			break
		}
		s.line = append(s.line, b[:i]...)
		b = b[i+1:]
		if len(s.line) > maxEventLine {
			s.refuse(fmt.Errorf("a line of more than %d bytes", maxEventLine))
			break
		}
		s.take(s.line)
		s.line = s.line[:0]
	}
	return n, nil
}

// take checks one line and sends it on.
func (s *eventStream) take(line []byte) {
	if !s.ready {
		if string(line) != watchReady {
			s.refuse(errors.New("no ready line"))
			return
		}
		s.ready = true
		s.g.Header().Set("Content-Type", "application/x-ndjson")
		s.g.WriteHeader(http.StatusOK)
		s.g.Flush()
		return
	}
	e, err := parseEvent(line)
	if err != nil {
		s.refuse(err)
		return
	}
	s.send(e)
	s.events++
}

// send writes e to the client, to go with the next flush.
func (s *eventStream) send(e api.FileEvent) {
	b, _ := json.Marshal(e)
	s.g.Write(append(b, '\n'))
}

// flush sends what was written; a client that does not take it within
// the send timeout ends the watch.
func (s *eventStream) flush() {
	s.g.Flush()
	if s.g.failed.Load() {
		s.cancel()
	}
}

func (s *eventStream) refuse(err error) {
	if s.refused == nil {
		s.refused = err
		s.cancel()
	}
}

// parseEvent checks a line of a watch, which the sandbox may have forged:
// one JSON object, a known type, and a name that is a clean relative path
// whose text agrees with its bytes.
func parseEvent(line []byte) (api.FileEvent, error) {
	var e api.FileEvent
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return e, fmt.Errorf("not an event: %w", err)
	}
	if dec.More() {
		return e, errors.New("not an event: more than one JSON value")
	}
	if !eventTypes[e.Type] || e.Reason != "" {
		return e, fmt.Errorf("not an event: type %q", e.Type)
	}
	if !agrees(e.Name, e.NameBase64) {
		return e, errors.New("an event's name: its text and its bytes differ")
	}
	name := rawName(api.DirEntry{Name: e.Name, NameBase64: e.NameBase64})
	if e.Type == "overflow" && (name != "" || e.Dir) {
		return e, errors.New("an overflow with a name")
	}
	if name != "" && (len(name) > unix.PathMax || strings.ContainsRune(name, 0) || path.Clean(name) != name || path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../")) {
		return e, fmt.Errorf("an event's name %q is not a path under the directory", name)
	}
	return e, nil
}

// watchFiles streams the changes under a directory of a sandbox (see
// watchDir). The watch is one step, from its start to its end: an
// approver sees it, the session counts it, and while it runs the sandbox
// is in use.
func (s *Server) watchFiles(w http.ResponseWriter, r *http.Request, c caller) int {
	args := []string{"watch"}
	switch r.URL.Query().Get("recursive") {
	case "", "0", "false":
	case "1", "true":
		args = append(args, "recursive")
	default:
		return fail(w, http.StatusBadRequest, "recursive: want 1 or 0, found %q", r.URL.Query().Get("recursive"))
	}
	e, p, release, status := s.fileTarget(w, r, c)
	if e == nil {
		return status
	}
	defer release()
	if inTurn(e.profile) {
		// As for a background command: a step that runs on would hold
		// every later one.
		return fail(w, http.StatusConflict, "sandbox %s's profile has trajectory rules that take one step at a time: a watch would hold every later step", e.id)
	}
	if rv := e.review; rv != nil && rv.guarded {
		return fail(w, http.StatusConflict, "sandbox %s's workspace is guarded: what its commands write lands only while nothing of it runs, and a watch runs until it is stopped", e.id)
	}
	if status := s.fileStep(w, r, c, e, p, "files.read", "file_watch", nil); status != 0 {
		return status
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// A watch runs until it is stopped: a drain does not wait for it.
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-s.drainBegan:
			cancel()
		case <-ctx.Done():
		}
	}()
	g := newSendGuard(w, s.cmdLimits.Send)
	defer g.done()
	events := &eventStream{g: g, cancel: cancel}
	stderr := &cappedBuffer{max: 4 << 10}
	argv := append([]string{"cordon", FileArg, args[0], p}, args[1:]...)
	o, err := e.box.Exec(ctx, sandbox.ExecOptions{Args: argv, SelfExec: true, Stdout: events, Stderr: stderr})
	switch {
	case !events.ready && err != nil:
		status = fail(w, http.StatusConflict, "%s", execError(e, err))
	case !events.ready && events.refused != nil:
		status = fail(w, http.StatusBadGateway, "watching %s in sandbox %s: the sandbox's answer was refused: %v", p, e.id, events.refused)
	case !events.ready && o.Status == outcome.OK:
		status = fail(w, http.StatusBadGateway, "watching %s in sandbox %s: the watch ended before it began", p, e.id)
	case !events.ready:
		status = fail(w, fileStatus(o), "watching %s in sandbox %s: %s", p, e.id, fileMessage(o, stderr.String()))
	default:
		status = http.StatusOK
		reason := watchEnd(r.Context(), s, e, p, o, err, events.refused)
		if reason != "" {
			events.send(api.FileEvent{Type: "end", Reason: reason})
			events.flush()
		}
		if err == nil && events.refused == nil && (reason == "" || o.Status == outcome.OK || s.isDraining()) {
			// It ended as watches end: its client left, its directory
			// went, the server stopped. Killing it is no failure.
			code := 0
			o = outcome.Outcome{Status: outcome.OK, CommandExitCode: &code, Message: "the watch ended"}
		}
	}
	s.afterStep(e, c, "files.read", p, &o, err, status, map[string]any{"operation": "watch", "events": events.events, "recursive": len(args) > 1})
	return status
}

// watchEnd says why a watch ended, for its last line; "" when its client
// left.
func watchEnd(client context.Context, s *Server, e *entry, p string, o outcome.Outcome, err error, refused error) string {
	switch {
	case s.isDraining():
		return "the server is stopping"
	case client.Err() != nil:
		return ""
	case refused != nil:
		return fmt.Sprintf("the sandbox's answer was refused: %v", refused)
	case err != nil || e.box.Why() != "" || isDone(e.box.Done()):
		return fmt.Sprintf("sandbox %s ended", e.id)
	case o.Status == outcome.OK:
		return fmt.Sprintf("%s was removed or moved", p)
	}
	return "the watch ended: " + o.Message
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
