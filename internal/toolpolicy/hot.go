package toolpolicy

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/cordon-sandbox/cordon/internal/cel"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// The decision of a call runs on every tool call an agent makes, so its
// common path allocates nothing: the strings a decision names are made
// once per tool and session (toolInfo), the labels a session carries are a
// small sorted set rather than a map, the windows of recent calls are
// buffers compacted in place, and the counters only trajectory rules read
// are kept only when the profile has such rules.

// toolInfo is what a session's decisions say of one tool, made at its
// first call.
type toolInfo struct {
	field       string // tools.NAME
	allowReason string
}

// info is the session's toolInfo for a listed tool.
func (s *Session) info(name string, t profile.Tool) *toolInfo {
	if ti, ok := s.tools[name]; ok {
		return ti
	}
	if s.tools == nil {
		s.tools = map[string]*toolInfo{}
	}
	ti := &toolInfo{
		field:       "tools." + name,
		allowReason: fmt.Sprintf("%s (%s) is allowed by the profile", name, t.Class),
	}
	s.tools[name] = ti
	return ti
}

// label is a label the session carries and the call that brought it in.
type label struct {
	name string
	origin
}

// labelSet are the labels of a session, sorted by name.
type labelSet []label

// find is the index of name in the set, and whether it is there.
func (ls labelSet) find(name string) (int, bool) {
	i := sort.Search(len(ls), func(i int) bool { return ls[i].name >= name })
	return i, i < len(ls) && ls[i].name == name
}

// add adds name, brought in by o, unless the set holds it already (then
// it keeps its first origin); o is made only when needed.
func (ls *labelSet) add(name string, o func() origin) {
	i, ok := ls.find(name)
	if ok {
		return
	}
	*ls = append(*ls, label{})
	copy((*ls)[i+1:], (*ls)[i:])
	(*ls)[i] = label{name: name, origin: o()}
}

// names are the labels, sorted, in a new slice.
func (ls labelSet) names() []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.name
	}
	return out
}

// appendNames appends the labels' names, sorted, to out.
func (ls labelSet) appendNames(out []string) []string {
	for _, l := range ls {
		out = append(out, l.name)
	}
	return out
}

// containsAll reports whether the sorted a holds every string of b.
func containsAll(a, b []string) bool {
	for _, x := range b {
		if _, ok := slices.BinarySearch(a, x); !ok {
			return false
		}
	}
	return true
}

// window keeps the last n values appended, contiguous, in a buffer of 2n
// compacted in place when full: no allocation once it has grown.
type window[T any] struct {
	buf []T
}

func (w *window[T]) push(v T, n int) {
	if len(w.buf) == 2*n {
		copy(w.buf, w.buf[n:])
		w.buf = w.buf[:n]
	}
	w.buf = append(w.buf, v)
}

// last are the last n values (fewer before n were pushed).
func (w *window[T]) last(n int) []T {
	if len(w.buf) > n {
		return w.buf[len(w.buf)-n:]
	}
	return w.buf
}

// nativeArgs are a call's arguments as constraints see them: the map
// itself when it holds only the values expressions see (as the gateway
// decodes them), else a converted copy. Expressions never change the map.
func nativeArgs(args map[string]any) map[string]any {
	if args == nil {
		return noArgs
	}
	if isNative(args) {
		return args
	}
	if m, ok := cel.Native(args).(map[string]any); ok && m != nil {
		return m
	}
	return noArgs
}

// noArgs are the arguments of a call without any, shared and never
// written.
var noArgs = map[string]any{}

// isNative reports whether cel.Native would give v back unchanged.
func isNative(v any) bool {
	switch v := v.(type) {
	case json.Number, int:
		return false
	case map[string]any:
		if v == nil {
			return false
		}
		for _, x := range v {
			if !isNative(x) {
				return false
			}
		}
	case []any:
		if v == nil {
			return false
		}
		for _, x := range v {
			if !isNative(x) {
				return false
			}
		}
	}
	return true
}
