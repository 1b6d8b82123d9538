package lint

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// sarifSchemaModule carries the SARIF 2.1.0 schema (OASIS) among its test
// data; the module proxy serves it.
const sarifSchemaModule = "github.com/securego/gosec/v2@v2.30.0"

func sarifSchema(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", sarifSchemaModule).Output()
	if err != nil {
		t.Fatalf("fetching the SARIF schema (%s) from the module proxy: %v", sarifSchemaModule, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download: %s", out)
	}
	return filepath.Join(m.Dir, "report", "sarif", "testdata", "sarif-schema-2.1.0.json")
}

func TestSARIFValidates(t *testing.T) {
	schema, err := jsonschema.NewCompiler().Compile(sarifSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	var all []Finding
	for _, fx := range []string{"testdata/lint/CL201-bad.yaml", "testdata/lint/CL001-bad.yaml", "testdata/lint/CL302-bad.yaml"} {
		fs, _ := lintFixture(t, fx)
		all = append(all, fs...)
	}
	for _, fs := range [][]Finding{all, nil} {
		var buf bytes.Buffer
		if err := WriteSARIF(&buf, fs, "test"); err != nil {
			t.Fatal(err)
		}
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(buf.String()))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(inst); err != nil {
			t.Fatalf("SARIF output does not validate: %v\n%s", err, buf.String())
		}
		var log sarifLog
		json.Unmarshal(buf.Bytes(), &log)
		if len(log.Runs) != 1 || len(log.Runs[0].Results) != len(fs) || len(log.Runs[0].Tool.Driver.Rules) != len(Rules()) {
			t.Fatalf("runs %+v", log.Runs)
		}
		for i, r := range log.Runs[0].Results {
			if rule := log.Runs[0].Tool.Driver.Rules[r.RuleIndex]; rule.ID != r.RuleID || r.RuleID != fs[i].Code {
				t.Errorf("result %d: rule index %d names %s, result says %s", i, r.RuleIndex, rule.ID, r.RuleID)
			}
			if fs[i].Line > 0 && (r.Locations[0].PhysicalLocation.Region == nil || r.Locations[0].PhysicalLocation.Region.StartLine != fs[i].Line) {
				t.Errorf("result %d: region %+v, want line %d", i, r.Locations[0].PhysicalLocation.Region, fs[i].Line)
			}
		}
	}
}

func TestTextAndJSON(t *testing.T) {
	fs, _ := lintFixture(t, "testdata/lint/CL401-bad.yaml")
	var text bytes.Buffer
	WriteText(&text, fs)
	if !strings.Contains(text.String(), "CL401-bad.yaml:") || !strings.Contains(text.String(), "error CL401 limit-unbounded: resources.wall: the wall limit is unlimited\n    fix: ") {
		t.Errorf("text:\n%s", text.String())
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, fs); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Findings []Finding
		Errors   int
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil || got.Errors != 2 || len(got.Findings) != len(fs) {
		t.Errorf("json: %v %s", err, js.String())
	}
}
