package profile

import "testing"

func BenchmarkParseDefault(b *testing.B) {
	for b.Loop() {
		if _, err := Parse(DefaultName, defaultYAML); err != nil {
			b.Fatal(err)
		}
	}
}
