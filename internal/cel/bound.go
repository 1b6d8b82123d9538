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
