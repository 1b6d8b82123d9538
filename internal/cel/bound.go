package cel

// Within returns the directories the path argument arg must be within for
// the expression to be true: when it is args.ARG.within("DIR") with a
// literal DIR, a conjunction with such a term, or a disjunction of such,
// ok is true and dirs are the DIRs, as written; otherwise (the expression
// may be true for a path anywhere) ok is false.
func (p *Program) Within(arg string) (dirs []string, ok bool) {
	return within(p.root, arg)
}

func within(n node, arg string) ([]string, bool) {
	switch n := n.(type) {
	case *callNode:
		sel, isSel := n.recv.(*selectNode)
		if n.fn != "within" || !n.path || !isSel || sel.field != arg || len(n.args) != 1 {
			return nil, false
		}
		if id, isID := sel.x.(*ident); !isID || id.name != "args" {
			return nil, false
		}
		l, isLit := n.args[0].(*lit)
		if !isLit {
			return nil, false
		}
		d, isStr := l.v.(string)
		return []string{d}, isStr && d != ""
	case *binaryNode:
		x, okx := within(n.x, arg)
		y, oky := within(n.y, arg)
		switch n.op {
		case "&&":
			// True only when both are: either bound holds.
			if okx {
				return x, true
			}
			return y, oky
		case "||":
			// True when either is: both must be bounded.
			if okx && oky {
				return append(x, y...), true
			}
		}
	}
	return nil, false
}

// ArgCall is a method called on an argument with one literal string:
// args.ARG.FN("LIT"), anywhere in an expression.
type ArgCall struct {
	Arg, Fn, Lit string
	// Col is the call's column in the expression, from 1.
	Col int
}

// ArgCalls returns every call of a method on args.ARG with one literal
// string argument, in the order they are written.
func (p *Program) ArgCalls() []ArgCall {
	var out []ArgCall
	walk(p.root, func(n node) {
		c, ok := n.(*callNode)
		if !ok || len(c.args) != 1 {
			return
		}
		sel, ok := c.recv.(*selectNode)
		if !ok {
			return
		}
		if id, ok := sel.x.(*ident); !ok || id.name != "args" {
			return
		}
		if l, ok := c.args[0].(*lit); ok {
			if s, ok := l.v.(string); ok {
				out = append(out, ArgCall{Arg: sel.field, Fn: c.fn, Lit: s, Col: c.pos + 1})
			}
		}
	})
	return out
}

// walk calls f on n and every node under it, depth first, in source order.
func walk(n node, f func(node)) {
	if n == nil {
		return
	}
	f(n)
	switch n := n.(type) {
	case *selectNode:
		walk(n.x, f)
	case *indexNode:
		walk(n.x, f)
		walk(n.i, f)
	case *callNode:
		walk(n.recv, f)
		for _, a := range n.args {
			walk(a, f)
		}
	case *unaryNode:
		walk(n.x, f)
	case *binaryNode:
		walk(n.x, f)
		walk(n.y, f)
	case *condNode:
		walk(n.c, f)
		walk(n.t, f)
		walk(n.f, f)
	case *listNode:
		for _, e := range n.elems {
			walk(e, f)
		}
	case *mapNode:
		for i := range n.keys {
			walk(n.keys[i], f)
			walk(n.vals[i], f)
		}
	case *hasNode:
		walk(n.x, f)
	case *compNode:
		walk(n.rng, f)
		walk(n.body, f)
	}
}
