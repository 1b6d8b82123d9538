package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/gateway"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// toolsOutput is what cordon mcp tools prints or writes.
type toolsOutput struct {
	json bool
	save string // keep the definitions in this pin file
	diff string // compare with the approved definitions in this pin file
}

// pinFile is the file of tool definitions by pin that --save writes and
// --diff reads: the profile's pins say which are approved, and each
// definition is checked against its pin when read, so the file can show
// what a pin approved but cannot approve anything.
type pinFile struct {
	Definitions map[string]json.RawMessage `json:"definitions"`
}

// mcpTools is cordon mcp tools: the upstream tools, offered or not, each
// with everything its pin covers; the servers that could not be reached
// make the exit status 1.
func mcpTools(e *env, p *profile.Profile, g *gateway.Gateway, out toolsOutput) int {
	ts := g.Upstream()
	code := 0
	for _, s := range g.Servers() {
		if !s.Up {
			fmt.Fprintf(e.stderr, "cordon: server %s could not be reached: %s; its tools are not listed\n", s.Name, termsafe.Line(s.Error))
			code = 1
		}
	}
	if out.save != "" {
		n, err := savePins(e, p, ts, out.save)
		if err != nil {
			return fail(e, err)
		}
		fmt.Fprintf(e.stderr, "cordon: kept %d definitions in %s\n", n, out.save)
	}
	var c int
	switch {
	case out.diff != "":
		c = diffPins(e, p, ts, out.diff)
	case out.json:
		c = printToolsJSON(e, ts)
	default:
		c = printTools(e, ts, code != 0)
	}
	return max(code, c)
}

func printToolsJSON(e *env, ts []gateway.Status) int {
	if ts == nil {
		ts = []gateway.Status{}
	}
	b, err := json.MarshalIndent(ts, "", "  ")
	if err != nil {
		return fail(e, fmt.Errorf("mcp tools: %w", err))
	}
	fmt.Fprintln(e.stdout, string(b))
	return 0
}

// printTools prints the upstream tools, offered or not, each with every
// field of its definition (what its pin covers) and the pin that would
// approve it as it is now.
func printTools(e *env, ts []gateway.Status, unreached bool) int {
	switch {
	case len(ts) == 0 && unreached:
		fmt.Fprintln(e.stdout, "no upstream tools could be listed")
		return 1
	case len(ts) == 0:
		fmt.Fprintln(e.stdout, "no upstream tools (the profile names no servers, or they offer none)")
		return 0
	}
	for _, t := range ts {
		state := "offered"
		if !t.Offered {
			state = "withdrawn: " + termsafe.Line(t.Why)
		}
		fmt.Fprintf(e.stdout, "%s\n", termsafe.Line(t.Name))
		printDefinition(e, t.Name, t.Definition, "  ")
		fmt.Fprintf(e.stdout, "  pin: %s\n  %s\n", t.Hash, state)
	}
	fmt.Fprintln(e.stdout, "\nTo approve a tool as it is now, read all of its definition, then set its pin under tools in the profile.")
	return 0
}

// printDefinition shows a definition whole: its description as text, each
// other field (schemas with their parameters' descriptions, annotations,
// _meta, icons) as indented JSON, all escaped for the terminal. What a tool
// server wrote is shown whole (what is pinned is what was read): text a
// terminal would hide or rewrite is shown as its bytes, and said to be so.
func printDefinition(e *env, name string, def json.RawMessage, indent string) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(def, &fields) != nil {
		fmt.Fprintf(e.stdout, "%s(no definition)\n", indent)
		return
	}
	var v any
	json.Unmarshal(def, &v)
	if termsafe.HasControl(name) || hasControl(v) {
		fmt.Fprintf(e.stdout, "%swarning: its definition holds control characters (shown escaped), which can hide or rewrite text on a terminal\n", indent)
	}
	var desc string
	if json.Unmarshal(fields["description"], &desc) == nil && desc != "" {
		for line := range strings.SplitSeq(strings.TrimRight(termsafe.Text(desc), "\n"), "\n") {
			fmt.Fprintf(e.stdout, "%s| %s\n", indent, line)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if k == "name" || k == "description" && desc != "" {
			continue
		}
		b, err := gateway.Pretty(fields[k])
		if err != nil {
			continue
		}
		text := strings.ReplaceAll(termsafe.Text(string(b)), "\n", "\n"+indent+"  ")
		fmt.Fprintf(e.stdout, "%s%s: %s\n", indent, termsafe.Line(k), text)
	}
}

// hasControl reports whether a string of the JSON value v, or a key of
// its objects, holds a character a terminal would act on.
func hasControl(v any) bool {
	switch v := v.(type) {
	case string:
		return termsafe.HasControl(v)
	case []any:
		return slices.ContainsFunc(v, hasControl)
	case map[string]any:
		for k, x := range v {
			if termsafe.HasControl(k) || hasControl(x) {
				return true
			}
		}
	}
	return false
}

// readPins reads a pin file, keeping only the definitions that match
// their pins.
func readPins(file string) (map[string]json.RawMessage, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var pf pinFile
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&pf); err != nil {
		return nil, fmt.Errorf("%s: not a file of tool definitions by pin (cordon mcp tools --save writes one): %w", file, err)
	}
	out := map[string]json.RawMessage{}
	for pin, def := range pf.Definitions {
		canon, err := gateway.CanonicalJSON(def)
		if err != nil {
			return nil, fmt.Errorf("%s: the definition of %s: %w", file, pin, err)
		}
		if gateway.HashOf(canon) != pin {
			return nil, fmt.Errorf("%s: the definition kept under %s does not match that pin (it is %s): the file was changed by hand", file, pin, gateway.HashOf(canon))
		}
		out[pin] = canon
	}
	return out, nil
}

// savePins writes the definitions listed now to file, keeping those of
// its definitions that the profile still pins; it returns how many it
// keeps.
func savePins(e *env, p *profile.Profile, ts []gateway.Status, file string) (int, error) {
	file = atCwd(e, file)
	defs := map[string]json.RawMessage{}
	old, err := readPins(file)
	switch {
	case os.IsNotExist(err):
	case err != nil:
		return 0, fmt.Errorf("--save: %w", err)
	}
	for _, name := range p.ToolNames() {
		if def, ok := old[p.Tools[name].Pin]; ok {
			defs[p.Tools[name].Pin] = def
		}
	}
	for _, t := range ts {
		if t.Definition != nil {
			defs[t.Hash] = t.Definition
		}
	}
	pretty := map[string]json.RawMessage{}
	for pin, def := range defs {
		b, err := gateway.Pretty(def)
		if err != nil {
			return 0, fmt.Errorf("--save: %s: %w", pin, err)
		}
		pretty[pin] = b
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(pinFile{Definitions: pretty}); err != nil {
		return 0, fmt.Errorf("--save: %w", err)
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return 0, fmt.Errorf("--save: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("--save: %w", err)
	}
	return len(defs), nil
}

func atCwd(e *env, file string) string {
	if filepath.IsAbs(file) {
		return file
	}
	return filepath.Join(e.cwd, file)
}

// diffPins shows, for each upstream tool, whether it is as its pin
// approved it and, when not, what changed: a unified diff of the approved
// definition (from the pin file) and the one listed now. Exit status 1
// when a pinned tool changed or is not listed.
func diffPins(e *env, p *profile.Profile, ts []gateway.Status, file string) int {
	approved, err := readPins(atCwd(e, file))
	if err != nil {
		return fail(e, fmt.Errorf("--diff: %w", err))
	}
	code := 0
	listed := map[string]bool{}
	for _, t := range ts {
		listed[t.Name] = true
		name := termsafe.Line(t.Name)
		decl, declared := p.Tools[t.Name]
		switch {
		case !declared:
			fmt.Fprintf(e.stdout, "%s: not declared in the profile (not offered)\n", name)
		case decl.Pin == "":
			fmt.Fprintf(e.stdout, "%s: not pinned in the profile; all of its definition is new:\n", name)
			printDefinition(e, t.Name, t.Definition, "  ")
			fmt.Fprintf(e.stdout, "  pin: %s\n", t.Hash)
		case decl.Pin == t.Hash:
			fmt.Fprintf(e.stdout, "%s: as pinned\n", name)
		default:
			code = 1
			fmt.Fprintf(e.stdout, "%s: changed since it was approved (pinned %s, now %s)\n", name, decl.Pin, t.Hash)
			old, ok := approved[decl.Pin]
			if !ok {
				fmt.Fprintf(e.stdout, "  %s does not keep the definition pinned; all of it as it is now:\n", file)
				printDefinition(e, t.Name, t.Definition, "  ")
				continue
			}
			if t.Definition == nil {
				fmt.Fprintf(e.stdout, "  %s\n", termsafe.Line(t.Why))
				continue
			}
			a, errA := gateway.Pretty(old)
			b, errB := gateway.Pretty(t.Definition)
			if errA != nil || errB != nil {
				continue
			}
			for _, line := range unifiedDiff("approved "+decl.Pin, "now "+t.Hash, strings.Split(string(a), "\n"), strings.Split(string(b), "\n")) {
				fmt.Fprintf(e.stdout, "  %s\n", termsafe.Text(line))
			}
		}
	}
	for _, name := range p.ToolNames() {
		if _, _, ok := p.Upstream(name); ok && p.Tools[name].Pin != "" && !listed[name] {
			code = 1
			fmt.Fprintf(e.stdout, "%s: pinned, but not listed (its server is down or no longer offers it)\n", name)
		}
	}
	return code
}

// diffContext is how many unchanged lines a hunk shows around a change.
const diffContext = 3

// maxDiffCells bounds the table of the longest common subsequence; past
// it, the lines that differ are shown as all removed, then all added.
const maxDiffCells = 4 << 20

// unifiedDiff is the unified diff of the lines a and b.
func unifiedDiff(nameA, nameB string, a, b []string) []string {
	// Common ends first: a definition changes in few places.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	type op struct {
		kind byte // ' ', '-', '+'
		text string
		ia   int // lines of a and b before it
		ib   int
	}
	var ops []op
	for i := range pre {
		ops = append(ops, op{' ', a[i], i, i})
	}
	if len(ma)*len(mb) > maxDiffCells {
		for i, l := range ma {
			ops = append(ops, op{'-', l, pre + i, pre})
		}
		for i, l := range mb {
			ops = append(ops, op{'+', l, pre + len(ma), pre + i})
		}
	} else {
		// lcs[i][j] is the length of the longest common subsequence of
		// ma[i:] and mb[j:].
		lcs := make([][]int, len(ma)+1)
		for i := range lcs {
			lcs[i] = make([]int, len(mb)+1)
		}
		for i := len(ma) - 1; i >= 0; i-- {
			for j := len(mb) - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(ma) || j < len(mb) {
			switch {
			case i < len(ma) && j < len(mb) && ma[i] == mb[j]:
				ops = append(ops, op{' ', ma[i], pre + i, pre + j})
				i, j = i+1, j+1
			case i < len(ma) && (j == len(mb) || lcs[i+1][j] >= lcs[i][j+1]):
				ops = append(ops, op{'-', ma[i], pre + i, pre + j})
				i++
			default:
				ops = append(ops, op{'+', mb[j], pre + i, pre + j})
				j++
			}
		}
	}
	for k := range suf {
		ops = append(ops, op{' ', a[len(a)-suf+k], len(a) - suf + k, len(b) - suf + k})
	}
	out := []string{"--- " + nameA, "+++ " + nameB}
	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		// A hunk: context before, changes and the unchanged lines between
		// them while they are close, context after.
		start := max(0, k-diffContext)
		end := k
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*diffContext {
				end = min(end+diffContext, len(ops))
				break
			}
			end = run
		}
		na, nb := 0, 0
		for _, o := range ops[start:end] {
			if o.kind != '+' {
				na++
			}
			if o.kind != '-' {
				nb++
			}
		}
		out = append(out, fmt.Sprintf("@@ -%d,%d +%d,%d @@", ops[start].ia+1, na, ops[start].ib+1, nb))
		for _, o := range ops[start:end] {
			out = append(out, string(o.kind)+o.text)
		}
		k = end
	}
	return out
}
