package cel

import (
	"fmt"
	"math"
	"regexp"

	"github.com/cordon-sandbox/cordon/internal/pathglob"
)

// Nodes of a parsed expression.
type (
	node  interface{}
	lit   struct{ v any }
	ident struct {
		name string
		pos  int
	}
	selectNode struct {
		x     node
		field string
		pos   int
	}
	indexNode struct {
		x, i node
		pos  int
	}
	callNode struct {
		fn   string
		recv node // nil for a global function
		args []node
		re   *regexp.Regexp // matches with a literal pattern, compiled once
		// custom is a method of the environment.
		custom func(recv any, args []any) (any, error)
		pos    int
		// path is a path method (pathMethods).
		path bool
	}
	unaryNode struct {
		op  string
		x   node
		pos int
	}
	binaryNode struct {
		op   string
		x, y node
		pos  int
	}
	condNode struct {
		c, t, f node
		pos     int
	}
	listNode struct{ elems []node }
	mapNode  struct {
		keys, vals []node
		pos        int
	}
	hasNode struct {
		x     node
		field string
		pos   int
	}
	// compNode is a macro over a list or a map's keys: all, exists,
	// exists_one, map or filter.
	compNode struct {
		macro string
		rng   node
		v     string
		body  node
		pos   int
	}
)

// parser is a recursive-descent parser of CEL's grammar.
type parser struct {
	toks    []token
	i       int
	vars    map[string]bool
	methods map[string]Method
	depth   int
}

// maxDepth bounds nesting, so that no expression exhausts the stack.
const maxDepth = 100

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }

func (p *parser) accept(kind string) bool {
	if p.peek().kind == kind {
		p.i++
		return true
	}
	return false
}

func (p *parser) expect(kind string) (token, error) {
	t := p.next()
	if t.kind != kind {
		return t, p.unexpected(t, "want "+kind)
	}
	return t, nil
}

func (p *parser) unexpected(t token, want string) error {
	if t.kind == "eof" {
		return &Error{Pos: t.pos, Msg: "unexpected end of expression, " + want}
	}
	what := t.text
	if what == "" {
		what = fmt.Sprint(t.val)
	}
	return &Error{Pos: t.pos, Msg: fmt.Sprintf("unexpected %q, %s", what, want)}
}

func (p *parser) expr() (node, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxDepth {
		return nil, &Error{Pos: p.peek().pos, Msg: "expression nested too deeply"}
	}
	c, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); p.accept("?") {
		a, err := p.or()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(":"); err != nil {
			return nil, err
		}
		b, err := p.expr()
		if err != nil {
			return nil, err
		}
		return &condNode{c: c, t: a, f: b, pos: t.pos}, nil
	}
	return c, nil
}

// binaryLevel parses a left-associative level of binary operators.
func (p *parser) binaryLevel(ops []string, sub func() (node, error)) (node, error) {
	x, err := sub()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		found := false
		for _, op := range ops {
			if t.kind == op {
				found = true
			}
		}
		if !found {
			return x, nil
		}
		p.i++
		y, err := sub()
		if err != nil {
			return nil, err
		}
		x = &binaryNode{op: t.kind, x: x, y: y, pos: t.pos}
	}
}

func (p *parser) or() (node, error) { return p.binaryLevel([]string{"||"}, p.and) }
func (p *parser) and() (node, error) {
	return p.binaryLevel([]string{"&&"}, p.relation)
}
func (p *parser) relation() (node, error) {
	return p.binaryLevel([]string{"<", "<=", ">", ">=", "==", "!=", "in"}, p.addition)
}
func (p *parser) addition() (node, error) {
	return p.binaryLevel([]string{"+", "-"}, p.multiplication)
}
func (p *parser) multiplication() (node, error) {
	return p.binaryLevel([]string{"*", "/", "%"}, p.unary)
}

// unary parses CEL's Unary: a member, or a run of one operator ("!" or
// "-") before a member; the two do not mix.
func (p *parser) unary() (node, error) {
	t := p.peek()
	if t.kind != "!" && t.kind != "-" {
		return p.member()
	}
	var ops []token
	for p.peek().kind == t.kind {
		ops = append(ops, p.next())
	}
	// As in CEL's reference parser, pairs cancel out: !!x is x.
	ops = ops[:len(ops)%2]
	if len(ops) == 0 {
		return p.member()
	}
	var x node
	// A negative literal is a literal: -9223372036854775808 fits.
	if n := p.peek(); t.kind == "-" && n.kind == "int" && p.toks[p.i+1].kind != "." && p.toks[p.i+1].kind != "[" {
		p.i++
		if _, ok := n.val.(minIntMagnitude); ok {
			x = &lit{v: int64(math.MinInt64)}
		} else {
			x = &lit{v: -n.val.(int64)}
		}
		ops = ops[:len(ops)-1]
	} else {
		var err error
		if x, err = p.member(); err != nil {
			return nil, err
		}
	}
	for i := len(ops) - 1; i >= 0; i-- {
		x = &unaryNode{op: ops[i].kind, x: x, pos: ops[i].pos}
	}
	return x, nil
}

func (p *parser) member() (node, error) {
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		switch {
		case p.accept("."):
			id, err := p.expect("ident")
			if err != nil {
				return nil, err
			}
			if p.peek().kind == "(" && macros[id.text] {
				p.i++
				if x, err = p.macro(x, id); err != nil {
					return nil, err
				}
				continue
			}
			if p.accept("(") {
				args, err := p.list(")")
				if err != nil {
					return nil, err
				}
				if x, err = p.method(x, id, args); err != nil {
					return nil, err
				}
				continue
			}
			x = &selectNode{x: x, field: id.text, pos: id.pos}
		case p.accept("["):
			i, err := p.expr()
			if err != nil {
				return nil, err
			}
			if _, err := p.expect("]"); err != nil {
				return nil, err
			}
			x = &indexNode{x: x, i: i, pos: t.pos}
		default:
			return x, nil
		}
	}
}

// list parses expressions separated by commas up to end (a trailing comma
// allowed), the opening bracket already read.
func (p *parser) list(end string) ([]node, error) {
	var out []node
	for !p.accept(end) {
		if len(out) > 0 {
			if _, err := p.expect(","); err != nil {
				return nil, err
			}
			if p.accept(end) {
				break
			}
		}
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func (p *parser) primary() (node, error) {
	t := p.next()
	switch t.kind {
	case "int", "double", "string", "bool":
		if _, ok := t.val.(minIntMagnitude); ok {
			return nil, &Error{Pos: t.pos, Msg: "integer 9223372036854775808 out of range"}
		}
		return &lit{v: t.val}, nil
	case "null":
		return &lit{v: nil}, nil
	case "(":
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		_, err = p.expect(")")
		return e, err
	case "[":
		elems, err := p.list("]")
		return &listNode{elems: elems}, err
	case "{":
		m := &mapNode{pos: t.pos}
		for !p.accept("}") {
			if len(m.keys) > 0 {
				if _, err := p.expect(","); err != nil {
					return nil, err
				}
				if p.accept("}") {
					break
				}
			}
			k, err := p.expr()
			if err != nil {
				return nil, err
			}
			if _, err := p.expect(":"); err != nil {
				return nil, err
			}
			v, err := p.expr()
			if err != nil {
				return nil, err
			}
			m.keys, m.vals = append(m.keys, k), append(m.vals, v)
		}
		return m, nil
	case "ident":
		if p.accept("(") {
			args, err := p.list(")")
			if err != nil {
				return nil, err
			}
			return p.global(t, args)
		}
		if !p.vars[t.text] {
			return nil, &Error{Pos: t.pos, Msg: fmt.Sprintf("undeclared reference to %q (the arguments are args)", t.text)}
		}
		return &ident{name: t.text, pos: t.pos}, nil
	}
	return nil, p.unexpected(t, "want an operand")
}

// global checks a call of a global function or macro.
func (p *parser) global(t token, args []node) (node, error) {
	switch t.text {
	case "has":
		s, ok := one(args).(*selectNode)
		if !ok {
			return nil, &Error{Pos: t.pos, Msg: "has() takes a field selection, as in has(args.name)"}
		}
		return &hasNode{x: s.x, field: s.field, pos: t.pos}, nil
	case "size", "int", "double", "string", "bool":
		if len(args) != 1 {
			return nil, &Error{Pos: t.pos, Msg: fmt.Sprintf("%s() takes one argument", t.text)}
		}
		return &callNode{fn: t.text, args: args, pos: t.pos}, nil
	}
	return nil, &Error{Pos: t.pos, Msg: fmt.Sprintf("undeclared function %s()", t.text)}
}

func one(args []node) node {
	if len(args) == 1 {
		return args[0]
	}
	return nil
}

// method checks a call of a method or a comprehension macro on x.
func (p *parser) method(x node, id token, args []node) (node, error) {
	switch id.text {
	case "startsWith", "endsWith", "contains", "matches":
		if len(args) != 1 {
			return nil, &Error{Pos: id.pos, Msg: fmt.Sprintf("%s() takes one argument", id.text)}
		}
		c := &callNode{fn: id.text, recv: x, args: args, pos: id.pos}
		if l, ok := args[0].(*lit); ok && id.text == "matches" {
			s, ok := l.v.(string)
			if !ok {
				return nil, &Error{Pos: id.pos, Msg: "matches() takes a string"}
			}
			re, err := regexp.Compile(s)
			if err != nil {
				return nil, &Error{Pos: id.pos, Msg: fmt.Sprintf("matches(): %v", err)}
			}
			c.re = re
		}
		return c, nil
	case "size":
		if len(args) != 0 {
			return nil, &Error{Pos: id.pos, Msg: "size() as a method takes no argument"}
		}
		return &callNode{fn: "size", args: []node{x}, pos: id.pos}, nil
	}
	if arity, ok := pathMethods[id.text]; ok {
		if len(args) != arity {
			return nil, &Error{Pos: id.pos, Msg: fmt.Sprintf("%s() takes %d arguments", id.text, arity)}
		}
		if l, ok := lit0(args); ok && id.text == "glob" {
			s, ok := l.v.(string)
			if !ok {
				return nil, &Error{Pos: id.pos, Msg: "glob() takes a string"}
			}
			if err := pathglob.Check(s); err != nil {
				return nil, &Error{Pos: id.pos, Msg: fmt.Sprintf("glob(): %v", err)}
			}
		}
		return &callNode{fn: id.text, recv: x, args: args, path: true, pos: id.pos}, nil
	}
	if m, ok := p.methods[id.text]; ok {
		if len(args) != m.Arity {
			return nil, &Error{Pos: id.pos, Msg: fmt.Sprintf("%s() takes %d arguments", id.text, m.Arity)}
		}
		return &callNode{fn: id.text, recv: x, args: args, custom: m.Fn, pos: id.pos}, nil
	}
	return nil, &Error{Pos: id.pos, Msg: fmt.Sprintf("undeclared method %s()", id.text)}
}

// lit0 is a call's only argument when it is a literal.
func lit0(args []node) (*lit, bool) {
	if len(args) != 1 {
		return nil, false
	}
	l, ok := args[0].(*lit)
	return l, ok
}

// macros are the comprehensions over a list or a map's keys.
var macros = map[string]bool{"all": true, "exists": true, "exists_one": true, "map": true, "filter": true}

// macro parses NAME, BODY) of a comprehension on rng, with NAME bound in
// BODY.
func (p *parser) macro(rng node, id token) (node, error) {
	v := p.next()
	if v.kind != "ident" || v.text == "args" {
		return nil, &Error{Pos: v.pos, Msg: fmt.Sprintf("%s(): the first argument must be a new variable name", id.text)}
	}
	if _, err := p.expect(","); err != nil {
		return nil, err
	}
	had := p.vars[v.text]
	p.vars[v.text] = true
	body, err := p.expr()
	p.vars[v.text] = had
	if err != nil {
		return nil, err
	}
	if _, err := p.expect(")"); err != nil {
		return nil, err
	}
	return &compNode{macro: id.text, rng: rng, v: v.text, body: body, pos: id.pos}, nil
}
