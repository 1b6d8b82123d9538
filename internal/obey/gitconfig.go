package obey

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// GitKey is one variable of a git configuration file, as git reads it:
// Section and Name lowercased (git compares them so), Sub kept as written
// for the quoted form ([remote "origin"]) and lowercased for the legacy
// one ([remote.origin]), Value after git's unquoting and escapes. NoValue
// is a name without "=" (a boolean true). HasSub: the section has a
// subsection, perhaps empty ([s ""]: git's s..name, another variable than
// s.name).
type GitKey struct {
	Section, Sub, Name, Value string
	HasSub, NoValue           bool
}

// Key is the variable's full name as git config --list writes it.
func (k GitKey) Key() string {
	if k.HasSub {
		return k.Section + "." + k.Sub + "." + k.Name
	}
	return k.Section + "." + k.Name
}

// String is the variable as a person reads it: key = value.
func (k GitKey) String() string {
	if k.NoValue {
		return k.Key()
	}
	return k.Key() + " = " + k.Value
}

// MaxGitConfig is the size of the largest git configuration file
// ParseGitConfig reads; a larger one is held unread.
const MaxGitConfig = 1 << 20

// maxGitKeys bounds the variables of one file.
const maxGitKeys = 1 << 14

// errGitConfig is what a file ParseGitConfig cannot read fully is: held.
var errGitConfig = errors.New("git configuration")

// ParseGitConfig reads a git configuration file as git itself does
// (config.c: sections [s], [s "sub"] and [s.sub], variables with or
// without a value, quotes, the escapes \n \t \b \\ \", lines continued by
// a backslash, comments after # or ;, a UTF-8 byte order mark at the
// start, CRLF line ends), only stricter: whatever git might read in
// another way is an error, never a guess. A NUL, a CR not before a
// newline, a variable before any section, a dot in a quoted section's
// name, an escape git rejects, an unterminated quote, an invalid name:
// each fails the whole file. Includes are variables like others
// (include.path); nothing is read but data.
func ParseGitConfig(data []byte) ([]GitKey, error) {
	if len(data) > MaxGitConfig {
		return nil, fmt.Errorf("%w: larger than %d bytes", errGitConfig, MaxGitConfig)
	}
	src, _ := strings.CutPrefix(string(data), "\xef\xbb\xbf")
	p := &gitParser{src: src, line: 1}
	keys, err := p.parse()
	if err != nil {
		return nil, fmt.Errorf("%w: line %d: %v", errGitConfig, p.line, err)
	}
	return keys, nil
}

// gitParser reads one file a character at a time, as git's does.
type gitParser struct {
	src  string
	pos  int
	line int
	eof  bool
}

// next is git's get_next_char: a CRLF is one newline, the end of the file
// a newline (eof set).
func (p *gitParser) next() (byte, error) {
	if p.pos >= len(p.src) {
		p.eof = true
		return '\n', nil
	}
	c := p.src[p.pos]
	p.pos++
	switch c {
	case 0:
		return 0, errors.New("a NUL byte")
	case '\r':
		if p.pos < len(p.src) && p.src[p.pos] == '\n' {
			p.pos++
			c = '\n'
		} else {
			return 0, errors.New("a carriage return not before a newline")
		}
	}
	if c == '\n' {
		p.line++
	}
	return c, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }
func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isKeyChar(c byte) bool {
	return isAlpha(c) || c >= '0' && c <= '9' || c == '-'
}
func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func (p *gitParser) parse() ([]GitKey, error) {
	var keys []GitKey
	var section, sub string
	inSection, hasSub, comment := false, false, false
	for {
		c, err := p.next()
		if err != nil {
			return nil, err
		}
		switch {
		case c == '\n':
			if p.eof {
				return keys, nil
			}
			comment = false
		case comment, isSpace(c):
		case c == '#' || c == ';':
			comment = true
		case c == '[':
			if section, sub, hasSub, err = p.header(); err != nil {
				return nil, err
			}
			inSection = true
		case isAlpha(c):
			if !inSection {
				return nil, errors.New("a variable outside any section")
			}
			k, err := p.variable(c)
			if err != nil {
				return nil, err
			}
			k.Section, k.Sub, k.HasSub = section, sub, hasSub
			if len(keys) >= maxGitKeys {
				return nil, fmt.Errorf("more than %d variables", maxGitKeys)
			}
			keys = append(keys, k)
		default:
			return nil, fmt.Errorf("unexpected %q", c)
		}
	}
}

// header reads a section's header after its "[": [name], [name.sub] (the
// legacy form: sub lowercased) or [name "sub"].
func (p *gitParser) header() (section, sub string, hasSub bool, err error) {
	var name []byte
	for {
		c, err := p.next()
		if err != nil {
			return "", "", false, err
		}
		switch {
		case p.eof || c == '\n':
			return "", "", false, errors.New("an unterminated section header")
		case c == ']':
			s := string(name)
			if s == "" || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") {
				return "", "", false, fmt.Errorf("an invalid section name %q", s)
			}
			section, sub, hasSub = strings.Cut(s, ".")
			return section, sub, hasSub, nil
		case isSpace(c):
			s := string(name)
			if s == "" || strings.Contains(s, ".") {
				return "", "", false, fmt.Errorf("an invalid section name %q", s)
			}
			sub, err := p.subsection()
			return s, sub, true, err
		case isKeyChar(c) || c == '.':
			name = append(name, lower(c))
		default:
			return "", "", false, fmt.Errorf("%q in a section name", c)
		}
	}
}

// subsection reads the quoted part of [name "sub"], after the space.
func (p *gitParser) subsection() (string, error) {
	c := byte(' ')
	var err error
	for c == ' ' || c == '\t' {
		if c, err = p.next(); err != nil {
			return "", err
		}
	}
	if c != '"' {
		return "", errors.New(`a section header neither [name], [name.sub] nor [name "sub"]`)
	}
	var sub []byte
	for {
		if c, err = p.next(); err != nil {
			return "", err
		}
		switch c {
		case '\n':
			return "", errors.New("an unterminated subsection name")
		case '"':
			if c, err = p.next(); err != nil {
				return "", err
			}
			if c != ']' {
				return "", errors.New(`a subsection's closing quote not followed by "]"`)
			}
			return string(sub), nil
		case '\\':
			if c, err = p.next(); err != nil {
				return "", err
			}
			if c != '\\' && c != '"' {
				return "", fmt.Errorf("the escape \\%c in a subsection name", c)
			}
		}
		sub = append(sub, c)
	}
}

// variable reads a variable whose name starts with first.
func (p *gitParser) variable(first byte) (GitKey, error) {
	name := []byte{lower(first)}
	var c byte
	var err error
	for {
		if c, err = p.next(); err != nil {
			return GitKey{}, err
		}
		if p.eof || !isKeyChar(c) {
			break
		}
		name = append(name, lower(c))
	}
	for c == ' ' || c == '\t' {
		if c, err = p.next(); err != nil {
			return GitKey{}, err
		}
	}
	k := GitKey{Name: string(name)}
	if c == '\n' {
		k.NoValue = true
		return k, nil
	}
	if c != '=' {
		return GitKey{}, fmt.Errorf("%q after the name %q", c, name)
	}
	k.Value, err = p.value()
	return k, err
}

// value is git's parse_value: whitespace outside quotes becomes one space
// each, but none at the start or the end; quotes toggle; a comment ends
// the value outside quotes; a backslash escapes n, t, b, \, " or a
// newline (the line goes on).
func (p *gitParser) value() (string, error) {
	var v []byte
	quote, comment, space := false, false, 0
	for {
		c, err := p.next()
		if err != nil {
			return "", err
		}
		if c == '\n' {
			if quote {
				return "", errors.New("an unterminated quote")
			}
			return string(v), nil
		}
		if comment {
			continue
		}
		if isSpace(c) && !quote {
			if len(v) > 0 {
				space++
			}
			continue
		}
		if !quote && (c == ';' || c == '#') {
			comment = true
			continue
		}
		for ; space > 0; space-- {
			v = append(v, ' ')
		}
		switch c {
		case '\\':
			if c, err = p.next(); err != nil {
				return "", err
			}
			switch c {
			case '\n':
				if p.eof {
					return "", errors.New("a backslash at the end of the file")
				}
				continue
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'n':
				c = '\n'
			case '\\', '"':
			default:
				return "", fmt.Errorf("the escape \\%c", c)
			}
			v = append(v, c)
		case '"':
			quote = !quote
		default:
			v = append(v, c)
		}
	}
}

// gitInitCore are the core variables git init and git clone write.
var gitInitCore = []string{"repositoryformatversion", "filemode", "bare", "logallrefupdates",
	"ignorecase", "precomposeunicode", "symlinks"}

// GitSafeKeys says, for a person, which variables of a repository's
// configuration land without approval (SafeGitKey); every other one is
// held, for git runs or obeys what it names.
var GitSafeKeys = []string{
	"user.* (who commits)",
	"branch.NAME.remote, .merge, .rebase, .pushremote, .description (what a branch tracks)",
	"remote.NAME.url (not a transport helper's NAME::ADDRESS, not starting with -) and remote.NAME.fetch",
	"init.defaultbranch",
	"core." + strings.Join(gitInitCore, ", core.") + " (what git init writes)",
	"extensions.objectformat (sha1 or sha256)",
}

// SafeGitKey reports whether git, reading k from a repository's
// configuration, runs and obeys nothing it names: see GitSafeKeys. The
// list is short on purpose: a variable not on it may be harmless, but is
// held for a person to see.
func SafeGitKey(k GitKey) bool {
	switch k.Section {
	case "user":
		return !k.HasSub
	case "branch":
		switch {
		case k.Sub == "":
			return false
		case k.Name == "remote" || k.Name == "pushremote":
			// A name no remote has is taken as an address.
			return safeAddress(k)
		}
		return slices.Contains([]string{"merge", "rebase", "description"}, k.Name)
	case "remote":
		switch {
		case k.Sub == "":
			return false
		case k.Name == "fetch":
			return true
		case k.Name == "url":
			return safeAddress(k)
		}
		return false
	case "init":
		return !k.HasSub && k.Name == "defaultbranch"
	case "core":
		return !k.HasSub && slices.Contains(gitInitCore, k.Name)
	case "extensions":
		return !k.HasSub && k.Name == "objectformat" && (k.Value == "sha1" || k.Value == "sha256")
	}
	return false
}

// safeAddress reports whether k's value is an address git reaches without
// running a program of the address's choosing: not ext::command or
// another helper's NAME::ADDRESS, not starting with - (an option to ssh).
func safeAddress(k GitKey) bool {
	return !k.NoValue && !strings.Contains(k.Value, "::") && !strings.HasPrefix(k.Value, "-")
}

// GitConfigHeld compares a repository's new configuration with its old
// one (nil: none) and returns the variables that were added or changed
// and are not safe (SafeGitKey), as key = value: what a person must see
// before it lands. A variable whose values are as before, or that was
// removed, is not judged: its old values were the host's. A variable
// given several values is judged by all of the new ones when they differ
// from the old in any way. An error means a file that cannot be read as
// git would: the change is held.
func GitConfigHeld(old, new []byte) ([]string, error) {
	newKeys, err := ParseGitConfig(new)
	if err != nil {
		return nil, fmt.Errorf("the new %w", err)
	}
	oldKeys, err := ParseGitConfig(old)
	if err != nil {
		// The host's own file git cannot read: every new variable is
		// judged.
		oldKeys = nil
	}
	values := func(keys []GitKey) map[string][]string {
		m := map[string][]string{}
		for _, k := range keys {
			v := "=" + k.Value
			if k.NoValue {
				v = ""
			}
			m[k.Key()] = append(m[k.Key()], v)
		}
		return m
	}
	was, is := values(oldKeys), values(newKeys)
	var held []string
	for _, k := range newKeys {
		if slices.Equal(was[k.Key()], is[k.Key()]) || SafeGitKey(k) {
			continue
		}
		if s := k.String(); !slices.Contains(held, s) {
			held = append(held, s)
		}
	}
	return held, nil
}
