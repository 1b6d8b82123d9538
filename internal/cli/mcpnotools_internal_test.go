package cli

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// The examples cordon mcp names are the example profiles that offer tools.
func TestToolExamplesAreTheExamplesWithTools(t *testing.T) {
	files, err := filepath.Glob("../../examples/profiles/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example profiles: %v", err)
	}
	var want []string
	for _, f := range files {
		if strings.HasSuffix(f, ".approval.yaml") {
			continue // an approval record, beside its profile
		}
		p, err := profile.LoadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if offersTools(p) {
			want = append(want, filepath.Base(f))
		}
	}
	if !slices.Equal(toolExamples, want) {
		t.Errorf("toolExamples = %q; the examples offering tools are %q", toolExamples, want)
	}
	if offersTools(profile.Default()) {
		t.Error("the default profile offers tools: cordon mcp's refusal of it is never seen")
	}
}
