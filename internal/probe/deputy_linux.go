package probe

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cordon-sandbox/cordon/internal/hostfile"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// The probes of cordon's own host side (THREATS 47-55): whatever the
// sandbox wrote, named or sent, cordon must act on none of it. Each gives
// the sandbox a writable workspace of its own, lets an attack prepare a
// trap there, and then does what cordon does on the host, or looks at what
// the host's own tools would obey.

// deputyProbes are the host-side probes of the confused deputy.
var deputyProbes = []HostProbe{
	{"host-file-links", "host", "leave a link to a host file, a link to /dev/zero, a FIFO and a hard link where cordon writes or reads a file",
		"cordon refuses each; the host file is unchanged, nothing blocks, nothing grows", probeFileLinks},
	{"host-protected-paths", "host", "write .git/config, .git/hooks, .git/commondir, a submodule's config and .git file, .vscode, .mcp.json, also by a hard link or a rename across directories; move .git away",
		"every write refused; nothing the host's git or editors obey changed", probeProtectedPaths},
	{"host-profile-tamper", "host", "rewrite the profile of the next run and forge its approval record, both in the workspace",
		"both refused; the profile unchanged, no record made", probeProfileTamper},
}

// workspace makes a writable workspace of the probe's own (open to the
// sandbox's user, whom the bind maps) and returns the profile using it.
func workspace(base *profile.Profile) (*profile.Profile, string, func(), error) {
	dir, err := tempDir("cordon-probe-ws-")
	if err != nil {
		return nil, "", nil, err
	}
	os.Chmod(dir, 0o755)
	p := base.Clone()
	p.SetLimit("wall", probeWall.String())
	p.Workspace = profile.Workspace{Path: dir, Writable: true}
	return p, dir, func() { os.RemoveAll(dir) }, nil
}

// tempDir makes a directory of the probe's own in the first temporary
// directory this user may write to.
func tempDir(prefix string) (string, error) {
	var first error
	for _, parent := range []string{os.TempDir(), "/var/tmp", "/dev/shm"} {
		dir, err := os.MkdirTemp(parent, prefix)
		if err == nil {
			return dir, nil
		}
		if first == nil {
			first = err
		}
	}
	return "", first
}

const victimText = "the host's own file\n"

// probeFileLinks plants, from inside, what a sandbox can leave where cordon
// writes an outcome or reads a profile or record, and then has cordon's
// host side (package hostfile) write and read there.
func probeFileLinks(r Runner, base *profile.Profile) (Status, string) {
	p, ws, cleanup, err := workspace(base)
	if err != nil {
		return Error, err.Error()
	}
	defer cleanup()
	victimDir, err := tempDir("cordon-probe-victim-")
	if err != nil {
		return Error, err.Error()
	}
	defer os.RemoveAll(victimDir)
	victim := filepath.Join(victimDir, "victim")
	if err := os.WriteFile(victim, []byte(victimText), 0o644); err != nil {
		return Error, err.Error()
	}
	if err := os.WriteFile(filepath.Join(ws, "own"), []byte(victimText), 0o666); err != nil {
		return Error, err.Error()
	}
	if _, err := attackSaid(r, Exec{Profile: p, Attack: []string{"plant", victim, victimDir}}, "planted"); err != nil {
		return Error, err.Error()
	}
	var escaped, refused []string
	for _, name := range []string{"link", "dirlink/out", "fifo", "hard"} {
		err, done := within(5*time.Second, func() error {
			return hostfile.WriteFile(filepath.Join(ws, name), []byte("written by cordon\n"), 0o644)
		})
		switch {
		case !done:
			escaped = append(escaped, "writing "+name+" blocked cordon")
		case err == nil && name == "fifo":
			escaped = append(escaped, "cordon wrote into the FIFO")
		case err == nil:
			refused = append(refused, name+": replaced, not followed")
		default:
			refused = append(refused, name+": "+short(err))
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != victimText {
		escaped = append(escaped, fmt.Sprintf("the host file %s was written through a link: %q", victim, b))
	}
	if _, err := os.Stat(filepath.Join(victimDir, "out")); err == nil {
		escaped = append(escaped, "cordon wrote into "+victimDir+" through a linked directory")
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "own")); string(b) != victimText {
		escaped = append(escaped, "a file with a second name was written through the hard link")
	}
	for _, name := range []string{"zero", "fifo-read"} {
		var n int
		err, done := within(5*time.Second, func() error {
			b, err := hostfile.ReadFile(filepath.Join(ws, name), 1<<20)
			n = len(b)
			return err
		})
		switch {
		case !done:
			escaped = append(escaped, "reading "+name+" blocked cordon")
		case err == nil:
			escaped = append(escaped, fmt.Sprintf("cordon read %d bytes from %s", n, name))
		default:
			refused = append(refused, name+": "+short(err))
		}
	}
	if len(escaped) > 0 {
		return Escaped, strings.Join(escaped, "; ")
	}
	return Contained, strings.Join(refused, "; ")
}

// attackSaid runs x and returns the line its attack printed, which must
// start with prefix: anything else means the attack did not do its part,
// and the probe cannot judge (an error).
func attackSaid(r Runner, x Exec, prefix string) (string, error) {
	out := &capture{max: 4096}
	x.Stdout = out
	o, err := r.Exec(x)
	if err != nil {
		return "", err
	}
	if said := out.line(); strings.HasPrefix(said, prefix) {
		return said, nil
	}
	return "", fmt.Errorf("the attack said %q (%s)", out.line(), o.Status)
}

// within runs f, giving up waiting after d.
func within(d time.Duration, f func() error) (err error, done bool) {
	c := make(chan error, 1)
	go func() { c <- f() }()
	select {
	case err := <-c:
		return err, true
	case <-time.After(d):
		return nil, false
	}
}

// short is an error's last part, the reason.
func short(err error) string {
	for _, e := range []struct {
		err  error
		text string
	}{{hostfile.ErrSymlink, "link refused"}, {hostfile.ErrNotFile, "not a regular file, refused"}, {hostfile.ErrHardLink, "hard link refused"}} {
		if errors.Is(err, e.err) {
			return e.text
		}
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// plantTraps is the attack of host-file-links, run in the workspace: a link
// to a host file, a link to a host directory, a link to /dev/zero, FIFOs
// and a hard link of a file of the workspace.
func plantTraps(victim, victimDir string) int {
	for _, err := range []error{
		os.Symlink(victim, "link"),
		os.Symlink(victimDir, "dirlink"),
		os.Symlink("/dev/zero", "zero"),
		syscall.Mkfifo("fifo", 0o666),
		syscall.Mkfifo("fifo-read", 0o666),
		os.Link("own", "hard"),
	} {
		if err != nil {
			report("could not plant: %v", err)
			return 0
		}
	}
	report("planted")
	return 0
}

// gitRepo lays out the parts of a repository the host's git obeys.
func gitRepo(ws string) error {
	for _, d := range []string{".git/hooks", ".git/info", ".git/objects", ".git/refs/heads", ".git/modules/sub/hooks", "sub"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			return err
		}
	}
	for f, text := range map[string]string{
		".git/HEAD":               "ref: refs/heads/main\n",
		".git/config":             "[core]\n\trepositoryformatversion = 0\n",
		".git/modules/sub/HEAD":   "ref: refs/heads/main\n",
		".git/modules/sub/config": "[core]\n\tworktree = ../../../sub\n",
		".gitmodules":             "[submodule \"sub\"]\n\tpath = sub\n\turl = ./sub\n",
		"sub/.git":                "gitdir: ../.git/modules/sub\n",
	} {
		if err := os.WriteFile(filepath.Join(ws, f), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// probeProtectedPaths has the sandbox plant what the host's git, editors
// and agents would run, in a repository of its workspace, and looks at the
// repository from the host afterwards.
func probeProtectedPaths(r Runner, base *profile.Profile) (Status, string) {
	p, ws, cleanup, err := workspace(base)
	if err != nil {
		return Error, err.Error()
	}
	defer cleanup()
	if err := gitRepo(ws); err != nil {
		return Error, err.Error()
	}
	before := snapshot(ws)
	said, err := attackSaid(r, Exec{Profile: p, Attack: []string{"protected"}}, "tried ")
	if err != nil {
		return Error, err.Error()
	}
	if changed := diffSnapshot(before, snapshot(ws)); len(changed) > 0 {
		return Escaped, "the host's repository and settings changed: " + strings.Join(changed, ", ")
	}
	return Contained, said
}

// protectedTraps is the attack of host-protected-paths.
var protectedTraps = []struct {
	what string
	do   func() error
}{
	{".git/config", func() error {
		return appendTo(".git/config", "[core]\n\tfsmonitor = \"touch /tmp/cordon-probe-pwned; false\"\n")
	}},
	{".git/hooks/pre-commit", func() error {
		return os.WriteFile(".git/hooks/pre-commit", []byte("#!/bin/sh\ntouch /tmp/cordon-probe-pwned\n"), 0o755)
	}},
	{".git/commondir", func() error { return os.WriteFile(".git/commondir", []byte("../elsewhere\n"), 0o644) }},
	{".git/info/attributes", func() error { return os.WriteFile(".git/info/attributes", []byte("* filter=x\n"), 0o644) }},
	{".vscode/settings.json", func() error {
		os.Mkdir(".vscode", 0o755)
		return os.WriteFile(".vscode/settings.json", []byte("{}\n"), 0o644)
	}},
	{".mcp.json", func() error {
		os.Remove(".mcp.json")
		return os.WriteFile(".mcp.json", []byte("{}\n"), 0o644)
	}},
	{".git/modules/sub/config", func() error {
		return appendTo(".git/modules/sub/config", "\tfsmonitor = \"touch /tmp/cordon-probe-pwned; false\"\n")
	}},
	{"sub/.git", func() error { return os.WriteFile("sub/.git", []byte("gitdir: ../elsewhere\n"), 0o644) }},
	// Moves and links across directories are allowed in the workspace:
	// none may reach into a protected path or out of one.
	{"linking .git/config", func() error {
		if err := os.Link(".git/config", "config-link"); err != nil {
			return err
		}
		defer os.Remove("config-link")
		return appendTo("config-link", "[core]\n\tfsmonitor = \"touch /tmp/cordon-probe-pwned; false\"\n")
	}},
	{"renaming into .git/hooks", func() error {
		if err := os.WriteFile("hook-tmp", []byte("#!/bin/sh\ntouch /tmp/cordon-probe-pwned\n"), 0o755); err != nil {
			return err
		}
		defer os.Remove("hook-tmp") // left where it was written when refused
		return os.Rename("hook-tmp", ".git/hooks/post-checkout")
	}},
	{"moving .git", func() error {
		if err := os.Rename(".git", ".git-moved"); err != nil {
			return err
		}
		return os.MkdirAll(".git/hooks", 0o755)
	}},
}

func protectedAttack() int {
	var got []string
	for _, t := range protectedTraps {
		if err := t.do(); err != nil {
			got = append(got, t.what+": "+short(err))
		} else {
			got = append(got, t.what+": done")
		}
	}
	report("tried %s", strings.Join(got, "; "))
	return 0
}

func appendTo(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// snapshot is every path under dir with its content (files) or "dir".
func snapshot(dir string) map[string]string {
	m := map[string]string{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case fi.IsDir():
			m[rel] = "dir"
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			m[rel] = string(b)
		default:
			m[rel] = fi.Mode().String()
		}
		return nil
	})
	return m
}

func diffSnapshot(before, after map[string]string) []string {
	var out []string
	for p, v := range after {
		if w, ok := before[p]; !ok {
			out = append(out, p+" appeared")
		} else if v != w {
			out = append(out, p+" changed")
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			out = append(out, p+" is gone")
		}
	}
	return out
}

// probeProfileTamper keeps the profile of the run, and where its approval
// record goes, in the sandbox's workspace, as a project that versions its
// profile does, and lets the attack rewrite them for the next run.
func probeProfileTamper(r Runner, base *profile.Profile) (Status, string) {
	p, ws, cleanup, err := workspace(base)
	if err != nil {
		return Error, err.Error()
	}
	defer cleanup()
	file := filepath.Join(ws, "agent.yaml")
	text := []byte("version: 1\nagent: probe\n")
	if err := os.WriteFile(file, text, 0o644); err != nil {
		return Error, err.Error()
	}
	record := filepath.Join(ws, "agent.approval.yaml")
	said, err := attackSaid(r, Exec{Profile: p, Attack: []string{"tamper", "agent.yaml", "agent.approval.yaml"}, Guard: []string{file, record}}, "tried ")
	if err != nil {
		return Error, err.Error()
	}
	var escaped []string
	if b, _ := os.ReadFile(file); !bytes.Equal(b, text) {
		escaped = append(escaped, "the profile was rewritten")
	}
	if fi, err := os.Lstat(record); err == nil {
		escaped = append(escaped, fmt.Sprintf("an approval record was made (%s)", fi.Mode()))
	}
	if len(escaped) > 0 {
		return Escaped, strings.Join(escaped, "; ")
	}
	return Contained, said
}

// tamperAttack appends a bind of / to the profile and forges its record.
func tamperAttack(profileFile, record string) int {
	var got []string
	if err := appendTo(profileFile, "mounts:\n  - path: /\n    writable: true\n"); err != nil {
		got = append(got, "profile: "+short(err))
	} else {
		got = append(got, "profile: rewritten")
	}
	os.Remove(record)
	if err := os.WriteFile(record, []byte("approved_by: the agent\n"), 0o644); err != nil {
		got = append(got, "record: "+short(err))
	} else {
		got = append(got, "record: forged")
	}
	report("tried %s", strings.Join(got, "; "))
	return 0
}
