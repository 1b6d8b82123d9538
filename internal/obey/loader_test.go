package obey_test

import (
	"testing"

	"github.com/cordon-sandbox/cordon/internal/obey"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// Whatever cordon's profile loader accepts as a profile, Content knows as
// one: what the sandbox writes cannot be a profile the review misses.
func FuzzContentKnowsEveryProfile(f *testing.F) {
	for _, seed := range []string{
		"version: 1\nagent: x\n",
		"\"\\x5Version\": 1\n\"\\x4Qgent\": x\n",
		"{\"\\u0076ersion\": 1, \"ag\\U00000065nt\": x}\n",
		"? \"ver\\\n  sion\"\n: 1\nagent: x\n",
		"base: &b {agent: x}\n<<: *b\nversion: 1\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > obey.MaxContent {
			return
		}
		if _, err := profile.Parse("fuzz.yaml", data); err == nil && obey.Content(data) == nil {
			t.Fatalf("%q loads as a profile, and Content does not know it", data)
		}
	})
}
