package cel

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// scope is what an expression's names are bound to: one variable (the
// arguments, args) held in the scope itself, the workspace that relative
// paths are taken from, and the variables of enclosing macros (and an
// environment's further variables), innermost first. A scope is passed by
// value, so that evaluating an expression puts none on the heap; only a
// macro's variables are.
type scope struct {
	name string
	val  any
	ws   string
	vars *binding
}

// binding is one variable of a scope's chain.
type binding struct {
	name string
	val  any
	up   *binding
}

func (s scope) lookup(name string) any {
	for b := s.vars; b != nil; b = b.up {
		if b.name == name {
			return b.val
		}
	}
	if s.name == name {
		return s.val
	}
	return nil
}

// with is s with name bound to val, above its other variables.
func (s scope) with(name string, val any) scope {
	s.vars = &binding{name: name, val: val, up: s.vars}
	return s
}

func noOverload(op string, vs ...any) error {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = typeName(v)
	}
	return fmt.Errorf("no such overload: %s(%s)", op, strings.Join(names, ", "))
}

var errOverflow = errors.New("integer overflow")

func eval(n node, s scope) (any, error) {
	switch n := n.(type) {
	case *lit:
		return n.v, nil
	case *ident:
		return s.lookup(n.name), nil
	case *selectNode:
		x, err := eval(n.x, s)
		if err != nil {
			return nil, err
		}
		m, ok := x.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("cannot select field %q from %s", n.field, typeName(x))
		}
		v, ok := m[n.field]
		if !ok {
			return nil, fmt.Errorf("no such key: %s", n.field)
		}
		return v, nil
	case *hasNode:
		x, err := eval(n.x, s)
		if err != nil {
			return nil, err
		}
		m, ok := x.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("has(): cannot test field %q of %s", n.field, typeName(x))
		}
		_, ok = m[n.field]
		return ok, nil
	case *indexNode:
		x, err := eval(n.x, s)
		if err != nil {
			return nil, err
		}
		i, err := eval(n.i, s)
		if err != nil {
			return nil, err
		}
		return index(x, i)
	case *listNode:
		out := make([]any, len(n.elems))
		for j, e := range n.elems {
			v, err := eval(e, s)
			if err != nil {
				return nil, err
			}
			out[j] = v
		}
		return out, nil
	case *mapNode:
		out := make(map[string]any, len(n.keys))
		for j := range n.keys {
			k, err := eval(n.keys[j], s)
			if err != nil {
				return nil, err
			}
			v, err := eval(n.vals[j], s)
			if err != nil {
				return nil, err
			}
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("unsupported map key type: %s", typeName(k))
			}
			out[ks] = v
		}
		return out, nil
	case *unaryNode:
		x, err := eval(n.x, s)
		if err != nil {
			return nil, err
		}
		switch v := x.(type) {
		case bool:
			if n.op == "!" {
				return !v, nil
			}
		case int64:
			if n.op == "-" {
				if v == math.MinInt64 {
					return nil, errOverflow
				}
				return -v, nil
			}
		case float64:
			if n.op == "-" {
				return -v, nil
			}
		}
		return nil, noOverload(n.op, x)
	case *binaryNode:
		if n.op == "&&" || n.op == "||" {
			return logical(n, s)
		}
		x, err := eval(n.x, s)
		if err != nil {
			return nil, err
		}
		y, err := eval(n.y, s)
		if err != nil {
			return nil, err
		}
		return binary(n.op, x, y)
	case *condNode:
		c, err := eval(n.c, s)
		if err != nil {
			return nil, err
		}
		b, ok := c.(bool)
		if !ok {
			return nil, noOverload("_?_:_", c)
		}
		if b {
			return eval(n.t, s)
		}
		return eval(n.f, s)
	case *callNode:
		return call(n, s)
	case *compNode:
		return comprehension(n, s)
	}
	return nil, fmt.Errorf("internal error: unknown node %T", n)
}

// logical evaluates && and ||: a false (true) operand decides, whatever
// the other is, even an error.
func logical(n *binaryNode, s scope) (any, error) {
	decisive := n.op == "||"
	x, xerr := eval(n.x, s)
	if b, ok := x.(bool); ok && xerr == nil && b == decisive {
		return decisive, nil
	}
	y, yerr := eval(n.y, s)
	if b, ok := y.(bool); ok && yerr == nil && b == decisive {
		return decisive, nil
	}
	if xerr != nil {
		return nil, xerr
	}
	if yerr != nil {
		return nil, yerr
	}
	_, xb := x.(bool)
	_, yb := y.(bool)
	if !xb || !yb {
		return nil, noOverload(n.op, x, y)
	}
	return !decisive, nil
}

func index(x, i any) (any, error) {
	switch c := x.(type) {
	case []any:
		var k int64
		switch v := i.(type) {
		case int64:
			k = v
		case float64:
			if v != math.Trunc(v) {
				return nil, fmt.Errorf("unsupported index value %v", v)
			}
			k = int64(v)
		default:
			return nil, noOverload("_[_]", x, i)
		}
		if k < 0 || k >= int64(len(c)) {
			return nil, fmt.Errorf("index out of range: %d", k)
		}
		return c[k], nil
	case map[string]any:
		ks, ok := i.(string)
		if !ok {
			return nil, fmt.Errorf("no such key: %v", i)
		}
		v, ok := c[ks]
		if !ok {
			return nil, fmt.Errorf("no such key: %s", ks)
		}
		return v, nil
	}
	return nil, noOverload("_[_]", x, i)
}

func binary(op string, x, y any) (any, error) {
	switch op {
	case "==":
		return equal(x, y), nil
	case "!=":
		return !equal(x, y), nil
	case "<", "<=", ">", ">=":
		c, ok := compare(x, y)
		if !ok {
			return nil, noOverload(op, x, y)
		}
		if c == 2 {
			return false, nil // NaN is ordered with nothing
		}
		switch op {
		case "<":
			return c < 0, nil
		case "<=":
			return c <= 0, nil
		case ">":
			return c > 0, nil
		}
		return c >= 0, nil
	case "in":
		switch c := y.(type) {
		case []any:
			return slices.ContainsFunc(c, func(e any) bool { return equal(x, e) }), nil
		case map[string]any:
			k, ok := x.(string)
			if !ok {
				return false, nil
			}
			_, ok = c[k]
			return ok, nil
		}
		return nil, noOverload("@in", x, y)
	}
	switch a := x.(type) {
	case int64:
		if b, ok := y.(int64); ok {
			return intArith(op, a, b)
		}
	case float64:
		if b, ok := y.(float64); ok {
			switch op {
			case "+":
				return a + b, nil
			case "-":
				return a - b, nil
			case "*":
				return a * b, nil
			case "/":
				return a / b, nil
			}
		}
	case string:
		if b, ok := y.(string); ok && op == "+" {
			return a + b, nil
		}
	case []any:
		if b, ok := y.([]any); ok && op == "+" {
			return append(slices.Clip(a), b...), nil
		}
	}
	return nil, noOverload(op, x, y)
}

func intArith(op string, a, b int64) (any, error) {
	switch op {
	case "+":
		r := a + b
		if (r > a) != (b > 0) {
			return nil, errOverflow
		}
		return r, nil
	case "-":
		r := a - b
		if (r < a) != (b > 0) {
			return nil, errOverflow
		}
		return r, nil
	case "*":
		if a != 0 && b != 0 {
			r := a * b
			if r/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
				return nil, errOverflow
			}
			return r, nil
		}
		return int64(0), nil
	case "/", "%":
		if b == 0 {
			if op == "/" {
				return nil, errors.New("division by zero")
			}
			return nil, errors.New("modulus by zero")
		}
		if a == math.MinInt64 && b == -1 {
			return nil, errOverflow
		}
		if op == "/" {
			return a / b, nil
		}
		return a % b, nil
	}
	return nil, noOverload(op, a, b)
}

// equal is CEL's equality: numbers compare by value across int and
// double, other values of different types are unequal.
func equal(x, y any) bool {
	if c, ok := numCompare(x, y); ok {
		return c == 0
	}
	switch a := x.(type) {
	case nil:
		return y == nil
	case string:
		b, ok := y.(string)
		return ok && a == b
	case bool:
		b, ok := y.(bool)
		return ok && a == b
	case []any:
		b, ok := y.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !equal(a[i], b[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		b, ok := y.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

// numCompare orders two numbers; a NaN compares as 2, equal to nothing.
func numCompare(x, y any) (int, bool) {
	switch a := x.(type) {
	case int64:
		switch b := y.(type) {
		case int64:
			return cmpOrdered(a, b), true
		case float64:
			return -floatIntCompare(b, a), true
		}
	case float64:
		switch b := y.(type) {
		case int64:
			return floatIntCompare(a, b), true
		case float64:
			if math.IsNaN(a) || math.IsNaN(b) {
				return 2, true
			}
			return cmpOrdered(a, b), true
		}
	}
	return 0, false
}

// floatIntCompare compares as cel-go does: the int as a double.
func floatIntCompare(f float64, i int64) int {
	if math.IsNaN(f) {
		return 2
	}
	return cmpOrdered(f, float64(i))
}

func cmpOrdered[T int64 | float64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compare orders numbers, strings and booleans.
func compare(x, y any) (int, bool) {
	if c, ok := numCompare(x, y); ok {
		if c == 2 {
			return 2, true // NaN: every ordering is false except !=
		}
		return c, true
	}
	switch a := x.(type) {
	case string:
		if b, ok := y.(string); ok {
			return cmpOrdered(a, b), true
		}
	case bool:
		if b, ok := y.(bool); ok {
			switch {
			case a == b:
				return 0, true
			case b:
				return -1, true
			}
			return 1, true
		}
	}
	return 0, false
}

func call(n *callNode, s scope) (any, error) {
	// The arguments of CEL's functions and cordon's path methods (at most
	// two) are kept on the stack; a custom method gets a copy of its own.
	var buf [2]any
	args := buf[:0]
	if len(n.args) > len(buf) {
		args = make([]any, 0, len(n.args))
	}
	args = args[:len(n.args)]
	for i, a := range n.args {
		v, err := eval(a, s)
		if err != nil {
			return nil, err
		}
		args[i] = v
	}
	if n.recv != nil {
		r, err := eval(n.recv, s)
		if err != nil {
			return nil, err
		}
		if n.custom != nil {
			return n.custom(r, append(make([]any, 0, len(args)), args...))
		}
		if n.path {
			return pathCall(n, r, args, s)
		}
		str, ok1 := r.(string)
		arg, ok2 := args[0].(string)
		if !ok1 || !ok2 {
			return nil, noOverload(n.fn, r, args[0])
		}
		switch n.fn {
		case "startsWith":
			return strings.HasPrefix(str, arg), nil
		case "endsWith":
			return strings.HasSuffix(str, arg), nil
		case "contains":
			return strings.Contains(str, arg), nil
		case "matches":
			re := n.re
			if re == nil {
				var err error
				if re, err = regexp.Compile(arg); err != nil {
					return nil, fmt.Errorf("matches(): %v", err)
				}
			}
			return re.MatchString(str), nil
		}
	}
	x := args[0]
	switch n.fn {
	case "size":
		switch v := x.(type) {
		case string:
			return int64(utf8.RuneCountInString(v)), nil
		case []any:
			return int64(len(v)), nil
		case map[string]any:
			return int64(len(v)), nil
		}
	case "int":
		switch v := x.(type) {
		case int64:
			return v, nil
		case float64:
			if math.IsNaN(v) || v <= -9.223372036854775808e18 || v >= 9.223372036854775807e18 {
				return nil, errors.New("double is out of int range")
			}
			return int64(v), nil
		case string:
			i, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("cannot convert %q to int", v)
			}
			return i, nil
		}
	case "double":
		switch v := x.(type) {
		case int64:
			return float64(v), nil
		case float64:
			return v, nil
		case string:
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, fmt.Errorf("cannot convert %q to double", v)
			}
			return f, nil
		}
	case "string":
		switch v := x.(type) {
		case string:
			return v, nil
		case int64:
			return strconv.FormatInt(v, 10), nil
		case float64:
			return strconv.FormatFloat(v, 'g', -1, 64), nil
		case bool:
			return strconv.FormatBool(v), nil
		}
	case "bool":
		switch v := x.(type) {
		case bool:
			return v, nil
		case string:
			switch v {
			case "1", "t", "true", "TRUE", "True":
				return true, nil
			case "0", "f", "false", "FALSE", "False":
				return false, nil
			}
			return nil, fmt.Errorf("cannot convert %q to bool", v)
		}
	}
	return nil, noOverload(n.fn, x)
}

// comprehension evaluates a macro over a list's elements or a map's keys
// (in sorted order).
func comprehension(n *compNode, s scope) (any, error) {
	r, err := eval(n.rng, s)
	if err != nil {
		return nil, err
	}
	var items []any
	switch v := r.(type) {
	case []any:
		items = v
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			items = append(items, k)
		}
	default:
		return nil, fmt.Errorf("%s() needs a list or a map, not %s", n.macro, typeName(r))
	}
	var firstErr error
	var out []any
	count := 0
	for _, it := range items {
		v, err := eval(n.body, s.with(n.v, it))
		switch n.macro {
		case "map":
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			continue
		}
		if err != nil {
			if n.macro == "exists_one" || n.macro == "filter" {
				return nil, err
			}
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		b, ok := v.(bool)
		if !ok {
			err := noOverload(n.macro, v)
			if n.macro == "exists_one" || n.macro == "filter" {
				return nil, err
			}
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		switch n.macro {
		case "all":
			if !b {
				return false, nil
			}
		case "exists":
			if b {
				return true, nil
			}
		case "exists_one":
			if b {
				count++
			}
		case "filter":
			if b {
				out = append(out, it)
			}
		}
	}
	switch n.macro {
	case "all", "exists":
		if firstErr != nil {
			return nil, firstErr
		}
		return n.macro == "all", nil
	case "exists_one":
		return count == 1, nil
	}
	if out == nil {
		out = []any{}
	}
	return out, nil
}
