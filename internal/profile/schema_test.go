package profile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/rogpeppe/go-internal/txtar"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The JSON Schema of profiles (docs/profile.schema.json) is what editors
// complete and check profiles with; these tests hold it to the loader.

const schemaFile = "../../docs/profile.schema.json"

// schemaComment is the first line of every example profile, which points
// editors using the YAML language server at the schema.
const schemaComment = "# yaml-language-server: $schema=../../docs/profile.schema.json"

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	s, err := jsonschema.NewCompiler().Compile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// schemaValidate checks YAML text against the schema.
func schemaValidate(s *jsonschema.Schema, src []byte) error {
	js, err := yaml.YAMLToJSON(src)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

var wrongType = regexp.MustCompile(`^want .+, found .+$`)

// structural reports whether the loader refused src for its structure (an
// unknown field, a value of the wrong type) rather than for a value.
func structural(src []byte) bool {
	_, err := Parse("p.yaml", src)
	var errs Errors
	if !errors.As(err, &errs) {
		return false
	}
	for _, e := range errs {
		if strings.HasPrefix(e.Msg, "unknown field ") || wrongType.MatchString(e.Msg) {
			return true
		}
	}
	return false
}

func TestExamplesFollowTheSchema(t *testing.T) {
	s := compileSchema(t)
	files, _ := filepath.Glob("../../examples/profiles/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example profiles")
	}
	for _, f := range files {
		if strings.HasSuffix(f, ".approval.yaml") {
			continue // an approval record, beside its profile
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if first, _, _ := strings.Cut(string(src), "\n"); first != schemaComment {
			t.Errorf("%s: the first line is %q, want %q", f, first, schemaComment)
		}
		if _, err := LoadFile(f); err != nil {
			t.Errorf("%s does not load: %v", f, err)
		}
		if err := schemaValidate(s, src); err != nil {
			t.Errorf("%s against the schema: %v", f, err)
		}
	}
	// The comment's path works from the examples' directory.
	if _, err := os.Stat(filepath.Join("../../examples/profiles", strings.TrimPrefix(schemaComment, "# yaml-language-server: $schema="))); err != nil {
		t.Error(err)
	}
	if err := schemaValidate(s, defaultYAML); err != nil {
		t.Errorf("the default profile against the schema: %v", err)
	}
}

// testProfiles are the profiles written in this repository's tests: the
// cases of this package, the lint fixtures and the YAML files of the CLI's
// scripts (some of which are no profiles at all: they must be refused).
func testProfiles(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, c := range parseErrorCases {
		out["parse error "+c.name] = []byte(c.src)
	}
	out["three mistakes"] = []byte(threeMistakes)
	out["wrong types"] = []byte(wrongTypes)
	for i, src := range misspelt {
		out["misspelt "+string(rune('a'+i))] = []byte(src)
	}
	fixtures, _ := filepath.Glob("../lint/testdata/lint/*.yaml")
	more, _ := filepath.Glob("../lint/testdata/lint/*/*.yaml")
	for _, f := range append(fixtures, more...) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = src
	}
	scripts, _ := filepath.Glob("../cli/testdata/script/*.txtar")
	for _, f := range scripts {
		a, err := txtar.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range a.Files {
			if strings.HasSuffix(file.Name, ".yaml") {
				out[f+":"+file.Name] = file.Data
			}
		}
	}
	if len(fixtures) == 0 || len(scripts) == 0 {
		t.Fatal("no lint fixtures or CLI scripts found")
	}
	return out
}

// A profile the loader refuses for its structure, the schema refuses too;
// one the loader takes, the schema takes.
func TestSchemaAgreesWithTheLoader(t *testing.T) {
	s := compileSchema(t)
	profiles := testProfiles(t)
	names := make([]string, 0, len(profiles))
	for name := range profiles {
		names = append(names, name)
	}
	sort.Strings(names)
	refused := 0
	for _, name := range names {
		src := profiles[name]
		_, loadErr := Parse(name, src)
		schemaErr := schemaValidate(s, src)
		switch {
		case structural(src):
			refused++
			if schemaErr == nil {
				t.Errorf("%s: the loader refuses its structure (%v), the schema takes it", name, loadErr)
			}
		case loadErr == nil && schemaErr != nil:
			t.Errorf("%s: the loader takes it, the schema refuses it: %v", name, schemaErr)
		}
	}
	t.Logf("%d profiles, %d refused for their structure", len(names), refused)
	if refused < 10 {
		t.Errorf("only %d profiles refused for their structure: the sweep finds too little", refused)
	}
}

// The schema names exactly the fields of the profile's Go types, at every
// level, with the JSON types they decode from.
func TestSchemaMatchesTheTypes(t *testing.T) {
	data, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	root, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	doc := root.(map[string]any)
	if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema is %v, want draft 2020-12", doc["$schema"])
	}
	w := schemaWalk{t: t, defs: doc["$defs"].(map[string]any), seen: map[reflect.Type]bool{}}
	w.check(reflect.TypeFor[Profile](), doc, "")
}

type schemaWalk struct {
	t    *testing.T
	defs map[string]any
	seen map[reflect.Type]bool
}

// resolve follows a $ref to its definition.
func (w *schemaWalk) resolve(node map[string]any, at string) map[string]any {
	ref, ok := node["$ref"].(string)
	if !ok {
		return node
	}
	def, ok := w.defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
	if !ok {
		w.t.Fatalf("%s: $ref %s names no definition", at, ref)
	}
	return def
}

func (w *schemaWalk) check(t reflect.Type, node map[string]any, at string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	node = w.resolve(node, at)
	if isLeaf(t) && t.Kind() != reflect.String && t.Kind() != reflect.Int && t.Kind() != reflect.Bool {
		return // Quantity and Toolchains read themselves; the schema says how in words
	}
	if _, enum := node["enum"]; enum {
		if t.Kind() != reflect.String {
			w.t.Errorf("%s: an enum for a %s", at, t)
		}
		return
	}
	if _, c := node["const"]; c {
		return
	}
	want := map[reflect.Kind]string{reflect.String: "string", reflect.Int: "integer", reflect.Bool: "boolean",
		reflect.Struct: "object", reflect.Map: "object", reflect.Slice: "array"}[t.Kind()]
	if got := node["type"]; got != want && !(t.Kind() == reflect.String && slices.Contains(asList(got), "string")) {
		w.t.Errorf("%s: the schema's type is %v, the Go type %s wants %q", at, got, t, want)
		return
	}
	switch t.Kind() {
	case reflect.Slice:
		w.check(t.Elem(), asMap(w.t, node["items"], at+"[]"), at+"[]")
	case reflect.Map:
		w.check(t.Elem(), asMap(w.t, node["additionalProperties"], at+".*"), at+".*")
	case reflect.Struct:
		if node["additionalProperties"] != false {
			w.t.Errorf("%s: additionalProperties is not false: the loader refuses unknown fields", at)
		}
		props := asMap(w.t, node["properties"], at)
		fields := yamlNames(t)
		var names []string
		for name := range props {
			names = append(names, name)
		}
		sort.Strings(names)
		sorted := slices.Sorted(slices.Values(fields))
		if !slices.Equal(names, sorted) {
			w.t.Errorf("%s (%s): the schema's properties are %q, the Go fields %q", at, t, names, sorted)
		}
		if w.seen[t] {
			return
		}
		w.seen[t] = true
		for _, name := range fields {
			f, _ := structField(t, name)
			if p, ok := props[name]; ok {
				w.check(f.Type, asMap(w.t, p, at+"."+name), strings.TrimPrefix(at+"."+name, "."))
			}
		}
	}
}

func asMap(t *testing.T, v any, at string) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: want a schema object, found %v", at, v)
	}
	return m
}

func asList(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}
