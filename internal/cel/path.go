package cel

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/pathglob"
)

// Path methods are cordon's, on strings that name files (a path argument
// is its resolved, canonical path): p.within(dir) is true when p is dir or
// under it; p.glob(pattern) matches p as a profile's label rules do; p.base(),
// p.dir() and p.ext() are its last name, its directory and its last name's
// extension (".md", "" for none). A relative path or dir is taken from the
// workspace, the directory the call's sandbox starts in: "notes/" is the
// workspace's notes. Relative names are cleaned as names, so a constraint
// reads a tool's path argument as a file only when it has been resolved.
var pathMethods = map[string]int{"within": 1, "glob": 1, "base": 0, "dir": 0, "ext": 0}

// CheckIn is Check with relative paths taken from the workspace ws.
func (p *Program) CheckIn(args map[string]any, ws string) error {
	v, err := eval(p.root, scope{name: "args", val: args, ws: ws})
	if err != nil {
		return err
	}
	b, ok := v.(bool)
	if !ok {
		return fmt.Errorf("gives %s, not a boolean", typeName(v))
	}
	if !b {
		return errFalse
	}
	return nil
}

// absPath is p made absolute from the workspace, and clean.
func absPath(method, p string, s scope) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%s(): an empty path", method)
	}
	if strings.HasPrefix(p, "/") {
		return filepath.Clean(p), nil
	}
	ws := s.ws
	if ws == "" {
		return "", fmt.Errorf("%s(): %q is relative, and the call has no workspace", method, p)
	}
	return filepath.Join(ws, p), nil
}

// pathCall evaluates a path method on the string recv.
func pathCall(n *callNode, recv any, args []any, s scope) (any, error) {
	str, ok := recv.(string)
	if !ok {
		return nil, noOverload(n.fn, append([]any{recv}, args...)...)
	}
	p, err := absPath(n.fn, str, s)
	if err != nil {
		return nil, err
	}
	switch n.fn {
	case "base":
		return filepath.Base(p), nil
	case "dir":
		return filepath.Dir(p), nil
	case "ext":
		return filepath.Ext(filepath.Base(p)), nil
	}
	arg, ok := args[0].(string)
	if !ok {
		return nil, noOverload(n.fn, recv, args[0])
	}
	switch n.fn {
	case "within":
		d, err := absPath(n.fn, arg, s)
		if err != nil {
			return nil, err
		}
		_, in := pathglob.Within(p, d)
		return in, nil
	case "glob":
		if err := pathglob.Check(arg); err != nil {
			return nil, fmt.Errorf("glob(): %v", err)
		}
		ws := s.ws
		return pathglob.MatchFile(arg, p, ws), nil
	}
	return nil, noOverload(n.fn, recv)
}
