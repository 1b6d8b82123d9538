package toolchain

import (
	"slices"
	"testing"
)

// ScriptCommands finds the programs a shell's -c script starts, and only
// there.
func TestScriptCommands(t *testing.T) {
	for _, tt := range []struct {
		argv []string
		want []string
	}{
		{[]string{"bash", "-c", "cd app && go test ./... | tee log; python3 -m pytest"}, []string{"cd", "go", "tee", "python3"}},
		{[]string{"/bin/sh", "-ec", "X=1 Y=2 node build.js\nif cargo --version; then exec npm ci; fi"}, []string{"node", "cargo", "npm"}},
		{[]string{"bash", "-lc", "$GO build; \"go\" vet; ./run.sh; /usr/bin/make; ls *.go"}, []string{"ls"}},
		{[]string{"bash", "script.sh", "-c", "go"}, nil},
		{[]string{"bash", "--norc", "-c", "go"}, nil},
		{[]string{"python3", "-c", "go"}, nil},
		{[]string{"sh", "-c"}, nil},
	} {
		if got := ScriptCommands(tt.argv); !slices.Equal(got, tt.want) {
			t.Errorf("%q: got %q, want %q", tt.argv, got, tt.want)
		}
	}
}
