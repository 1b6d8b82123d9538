package cel_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	celgo "cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"

	"github.com/cordon-sandbox/cordon/internal/cel"
)

// argSets are the arguments the expressions are evaluated with.
var argSets = []string{
	`{}`,
	`{"path": "/workspace/notes.md", "amount": 42, "ratio": 0.5, "tags": ["a", "b"], "opts": {"force": true, "depth": 2}, "url": "https://docs.example.org/x?q=1", "n": null}`,
	`{"path": "/etc/shadow", "amount": 101, "ratio": -1.5e3, "tags": [], "opts": {}, "url": "http://169.254.169.254/", "big": 9223372036854775807}`,
	`{"path": "rel/../x", "amount": 100.0, "ratio": 100, "tags": ["a", 1, 2.5, null, [1], {"k": "v"}], "unicode": "héllo wörld", "s": "100"}`,
}

// exprs cover every construct the package implements, with values that
// reach its error paths.
var exprs = []string{
	`true`, `false`, `null`, `1`, `-1`, `0x10`, `1.5`, `-2.5e-3`, `"s"`, `'s'`, `r"\d"`, `"\x41\u00e9\101\n"`, `"""tri"ple"""`,
	`-9223372036854775808`, `9223372036854775807 + 1`, `-9223372036854775807 - 2`, `4611686018427387904 * 2`, `-(-9223372036854775807 - 1)`,
	`(-9223372036854775807 - 1) / -1`, `(-9223372036854775807 - 1) % -1`, `7 / 2`, `-7 / 2`, `-7 % 3`, `1 / 0`, `1 % 0`, `1.0 / 0.0`, `5.5 % 2.0`,
	`1 + 2 * 3 - 4`, `(1 + 2) * 3`, `1 + 1.0`, `1.5 + 2.5`, `"a" + "b"`, `[1] + [2, 3]`, `"a" + 1`, `!true`, `!1`, `-"x"`, `--1`, `!!false`,
	`1 == 1.0`, `1 == 1`, `1 != 2`, `1 == "1"`, `null == null`, `[1, 2] == [1, 2.0]`, `{"a": 1} == {"a": 1.0}`, `[1] == [1, 2]`, `{"a": 1} == {"b": 1}`,
	`1 < 2.5`, `2.5 < 1`, `"a" < "b"`, `false < true`, `true <= true`, `1 < "a"`, `[1] < [2]`, `9223372036854775807 < 9223372036854775808.0`,
	`double("NaN") == double("NaN")`, `double("NaN") < 1.0`, `double("NaN") >= 1`, `double("NaN") != 1`,
	`true && false`, `false && (1/0 == 1)`, `(1/0 == 1) && false`, `(1/0 == 1) || true`, `true || (1/0 == 1)`, `(1/0 == 1) && true`, `1 && true`, `1 && false`, `true || 1`, `1 || false`,
	`true ? 1 : 2`, `false ? 1 : "two"`, `1 ? 2 : 3`, `true ? false ? 1 : 2 : 3`,
	`1 in [1, 2]`, `3 in [1, 2]`, `1.0 in [1]`, `"a" in {"a": 1}`, `1 in {"a": 1}`, `"a" in "abc"`,
	`size("héllo")`, `size([1, 2])`, `size({"a": 1})`, `"abc".size()`, `size(1)`,
	`int(1.9)`, `int(-1.9)`, `int("42")`, `int("x")`, `int(1e19)`, `double(1)`, `double("2.5")`, `string(1)`, `string(1.5)`, `string(true)`, `string(1e20)`, `bool("true")`, `bool("x")`,
	`"hello".startsWith("he")`, `"hello".endsWith("lo")`, `"hello".contains("ll")`, `"hello".matches("^h.*o$")`, `"hello".matches("[")`, `"x".startsWith(1)`,
	`[1, 2, 3].all(x, x > 0)`, `[1, 2, 3].exists(x, x > 2)`, `[1, 2, 3].exists_one(x, x > 1)`, `[1, 2, 3].map(x, x * 2)`, `[1, 2, 3].filter(x, x % 2 == 1)`,
	`[1, "a"].all(x, x > 0)`, `[1, "a"].exists(x, x > 0)`, `[0, "a"].all(x, x > 0)`, `{"b": 1, "a": 2}.all(k, k in ["a", "b"])`, `{"b": 1, "a": 2}.map(k, k).exists(k, k == "b")`, `[].all(x, false)`, `[].exists(x, true)`,
	`[[1, 2], [3]].all(l, l.all(x, x > 0))`, `1.all(x, true)`,
	`[1, 2][1]`, `[1, 2][2]`, `[1, 2][-1]`, `[1, 2][1.0]`, `{"a": 1}["a"]`, `{"a": 1}["b"]`, `{"a": 1}.a`, `{"a": 1}.b`, `{"a": {"b": 2}}.a.b`, `{1: 2}`, `{"a": 1, "a": 2}`,
	`has({"a": 1}.a)`, `has({"a": 1}.b)`,
	`args.path.startsWith("/workspace/")`, `!args.path.contains("..")`, `args.amount <= 100`, `args.amount > 100`, `args.amount == 42`, `args.ratio < 1`,
	`args.tags.all(t, t in ["a", "b"])`, `size(args.tags) <= 2`, `args.opts.force`, `has(args.opts.force) && args.opts.force == true`, `has(args.path)`, `has(args.missing)`,
	`args.url.matches("^https://[a-z.]*\\.example\\.org/")`, `args.missing == 1`, `args.n == null`, `args.big + 1 > 0`, `args.amount % 2 == 0`, `args.amount / 3`,
	`args.s == "100"`, `int(args.s) == args.amount`, `size(args.unicode)`, `args.tags[0]`, `args["path"]`, `args.opts.depth * 2.0`,
	`has(args.path) ? args.path.startsWith("/") : true`, `!has(args.url) || args.url.startsWith("https://")`,
}

func TestAgainstCelGo(t *testing.T) {
	env, err := celgo.NewEnv(celgo.Variable("args", celgo.MapType(celgo.StringType, celgo.DynType)))
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range exprs {
		for _, js := range argSets {
			args, err := cel.FromJSON([]byte(js))
			if err != nil {
				t.Fatal(err)
			}
			ours, ourErr := evalOurs(src, args)
			ref, refErr := evalRef(env, src, args)
			switch {
			case ourErr != nil && refErr != nil:
			case ourErr != nil:
				t.Errorf("%s with %s: cordon fails (%v), cel-go gives %#v", src, js, ourErr, ref)
			case refErr != nil:
				t.Errorf("%s with %s: cordon gives %#v, cel-go fails (%v)", src, js, ours, refErr)
			case !same(ours, ref):
				t.Errorf("%s with %s: cordon gives %#v, cel-go %#v", src, js, ours, ref)
			}
		}
	}
}

func evalOurs(src string, args map[string]any) (any, error) {
	p, err := cel.Compile(src)
	if err != nil {
		return nil, err
	}
	return p.Eval(args)
}

func evalRef(env *celgo.Env, src string, args map[string]any) (any, error) {
	// Parsed, not checked: the arguments are dynamic, so what matters is
	// how values behave at run time.
	ast, iss := env.Parse(src)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	prg, err := env.Program(ast)
	if err != nil {
		return nil, err
	}
	v, _, err := prg.Eval(map[string]any{"args": args})
	if err != nil {
		return nil, err
	}
	return native(v)
}

// native turns a cel-go value into the values this package uses.
func native(v ref.Val) (any, error) {
	switch v.Type() {
	case types.IntType, types.DoubleType, types.StringType, types.BoolType:
		return v.Value(), nil
	case types.NullType:
		return nil, nil
	case types.ListType:
		l := v.(traits.Lister)
		out := []any{}
		for it := l.Iterator(); it.HasNext() == types.True; {
			e, err := native(it.Next())
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	case types.MapType:
		m := v.(traits.Mapper)
		out := map[string]any{}
		for it := m.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.Value().(string)
			if !ok {
				return nil, fmt.Errorf("map key %v", k)
			}
			e, err := native(m.Get(k))
			if err != nil {
				return nil, err
			}
			out[ks] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("cel-go value of type %v", v.Type())
}

func same(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && (x == y || math.IsNaN(x) && math.IsNaN(y))
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !same(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if !same(x[k], y[k]) {
				return false
			}
		}
		return true
	}
	return a == b
}

func TestCompileErrors(t *testing.T) {
	for src, want := range map[string]string{
		``:                         "empty expression",
		`args.`:                    "column 6: unexpected end of expression, want ident",
		`foo == 1`:                 `column 1: undeclared reference to "foo"`,
		`args.path.lower()`:        "undeclared method lower()",
		`now()`:                    "undeclared function now()",
		`args.x.matches("[")`:      "matches(): error parsing regexp",
		`1u`:                       "unsigned literals",
		`99999999999999999999`:     "out of range",
		`"open`:                    "unterminated string",
		`has(args)`:                "has() takes a field selection",
		`[1].all(args, true)`:      "new variable name",
		`1 +`:                      "unexpected end of expression",
		`(1`:                       "want )",
		`1 2`:                      "want the end of the expression",
		`args.a # b`:               `unexpected character '#'`,
		strings.Repeat("(", 200):   "nested too deeply",
		`[1].all(x, y > 0)`:        `undeclared reference to "y"`,
		`size(1, 2)`:               "size() takes one argument",
		`"a".startsWith("a", "b")`: "startsWith() takes one argument",
	} {
		_, err := cel.Compile(src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Compile(%q) = %v, want an error with %q", src, err, want)
		}
	}
}

func TestCheck(t *testing.T) {
	p, err := cel.Compile(`args.amount <= 100`)
	if err != nil {
		t.Fatal(err)
	}
	ok, _ := cel.FromJSON([]byte(`{"amount": 100}`))
	over, _ := cel.FromJSON([]byte(`{"amount": 100.5}`))
	wrong, _ := cel.FromJSON([]byte(`{"amount": "lots"}`))
	missing, _ := cel.FromJSON([]byte(`{}`))
	if err := p.Check(ok); err != nil {
		t.Errorf("100 <= 100: %v", err)
	}
	if err := p.Check(over); !cel.IsFalse(err) {
		t.Errorf("100.5 <= 100: %v, want false", err)
	}
	for _, a := range []map[string]any{wrong, missing} {
		if err := p.Check(a); err == nil || cel.IsFalse(err) {
			t.Errorf("%v: %v, want an evaluation error", a, err)
		}
	}
	q, _ := cel.Compile(`args.amount`)
	if err := q.Check(ok); err == nil || !strings.Contains(err.Error(), "not a boolean") {
		t.Errorf("a number as a constraint: %v", err)
	}
	if _, err := cel.FromJSON([]byte(`[1]`)); err == nil {
		t.Error("a list as the arguments was accepted")
	}
}

func FuzzCompile(f *testing.F) {
	for _, e := range exprs {
		f.Add(e)
	}
	args, _ := cel.FromJSON([]byte(argSets[1]))
	f.Fuzz(func(t *testing.T, src string) {
		p, err := cel.Compile(src)
		if err != nil {
			return
		}
		p.Eval(args)
	})
}

// FuzzAgainstCelGo looks for an expression that cordon accepts and that
// cel-go rejects, or that cordon evaluates to a value that cel-go does not
// give.
func FuzzAgainstCelGo(f *testing.F) {
	for _, e := range exprs {
		f.Add(e)
	}
	env, err := celgo.NewEnv(celgo.Variable("args", celgo.MapType(celgo.StringType, celgo.DynType)))
	if err != nil {
		f.Fatal(err)
	}
	args, _ := cel.FromJSON([]byte(argSets[1]))
	f.Fuzz(func(t *testing.T, src string) {
		p, err := cel.Compile(src)
		if err != nil {
			return
		}
		if _, iss := env.Parse(src); iss.Err() != nil {
			t.Fatalf("%q: cordon compiles it, cel-go does not: %v", src, iss.Err())
		}
		ours, ourErr := p.Eval(args)
		ref, refErr := evalRef(env, src, args)
		if ourErr != nil && refErr == nil {
			// An error refuses the call: cordon is stricter than cel-go
			// here (has(args.a).b is false to cel-go), which fails
			// closed. The other way round would not.
			return
		}
		if (ourErr != nil) != (refErr != nil) || ourErr == nil && !same(ours, ref) {
			t.Fatalf("%q: cordon %#v (%v), cel-go %#v (%v)", src, ours, ourErr, ref, refErr)
		}
	})
}
