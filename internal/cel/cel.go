// Package cel evaluates the argument constraints of a profile's tools:
// expressions of the Common Expression Language (CEL) over the structured
// arguments of one tool call, such as args.path.startsWith("/workspace/")
// or args.amount <= 100.
//
// It implements the part of CEL that constraints need: literals, lists and
// maps, field selection and indexing, arithmetic, comparison, the logical
// operators with CEL's commutative handling of errors, in, the conditional
// operator, has(), size(), the conversions int(), double(), string() and
// bool(), the string methods startsWith, endsWith, contains and matches
// (RE2), and the macros all, exists, exists_one, map and filter; and
// cordon's path methods within, glob, base, dir and ext (path.go), over a
// path argument resolved to its file. Anything else is refused when the
// profile is loaded, so a constraint never means something other than
// what it says. The tests check every construct
// against cel-go, CEL's reference implementation in Go; cordon does not link
// cel-go itself, whose initialisation would slow every cordon process.
package cel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Error is an expression that does not compile, at byte offset Pos.
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("column %d: %s", e.Pos+1, e.Msg) }

// Program is a compiled expression.
type Program struct {
	src  string
	root node
}

// Compile parses src, in which the arguments of the call are the map args.
func Compile(src string) (*Program, error) {
	return (&Env{Vars: []string{"args"}}).Compile(src)
}

// Env declares what an expression may name besides CEL's own: its
// variables, and methods of cordon's (session.denials_last(20)).
type Env struct {
	Vars    []string
	Methods map[string]Method
}

// Method is a method an Env adds: it takes Arity arguments and is applied
// to the value it is called on.
type Method struct {
	Arity int
	Fn    func(recv any, args []any) (any, error)
}

// Compile parses src in the environment.
func (e *Env) Compile(src string) (*Program, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &Error{Msg: "empty expression"}
	}
	if !utf8.ValidString(src) {
		return nil, &Error{Msg: "the expression is not valid UTF-8"}
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, vars: map[string]bool{}, methods: e.Methods}
	for _, v := range e.Vars {
		p.vars[v] = true
	}
	root, err := p.expr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != "eof" {
		return nil, p.unexpected(t, "want the end of the expression")
	}
	return &Program{src: src, root: root}, nil
}

// String is the expression's source.
func (p *Program) String() string { return p.src }

// Eval evaluates the expression with args bound to the call's arguments
// (as FromJSON gives them) and returns its value.
func (p *Program) Eval(args map[string]any) (any, error) {
	return eval(p.root, scope{name: "args", val: args})
}

// EvalVars evaluates the expression with its environment's variables.
func (p *Program) EvalVars(vars map[string]any) (any, error) {
	var s scope
	for name, v := range vars {
		s = s.with(name, v)
	}
	return eval(p.root, s)
}

// Check evaluates a constraint: nil when it holds, else why not (false, an
// error, or a value that is not a boolean).
func (p *Program) Check(args map[string]any) error {
	v, err := p.Eval(args)
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

// errFalse is a constraint that evaluated to false.
var errFalse = fmt.Errorf("is false")

// IsFalse reports whether err from Check is a constraint that is false
// (rather than one that could not be evaluated).
func IsFalse(err error) bool { return err == errFalse }

// FromJSON decodes a JSON object of arguments into the values expressions
// see: objects as maps, arrays as lists, integral numbers as int and other
// numbers as double.
func FromJSON(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the arguments")
	}
	m, ok := v.(map[string]any)
	if !ok && v != nil {
		return nil, fmt.Errorf("the arguments are %s, not an object", typeName(Native(v)))
	}
	if m == nil {
		m = map[string]any{}
	}
	return Native(m).(map[string]any), nil
}

// Native converts a value decoded by encoding/json (with UseNumber or
// without) into the values expressions see.
func Native(v any) any {
	switch v := v.(type) {
	case json.Number:
		if !strings.ContainsAny(string(v), ".eE") {
			if n, err := v.Int64(); err == nil {
				return n
			}
		}
		f, _ := v.Float64()
		return f
	case float64:
		return v
	case int:
		return int64(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = Native(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = Native(x)
		}
		return out
	}
	return v
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case int64:
		return "int"
	case float64:
		return "double"
	case string:
		return "string"
	case bool:
		return "bool"
	case []any:
		return "list"
	case map[string]any:
		return "map"
	}
	return fmt.Sprintf("%T", v)
}
