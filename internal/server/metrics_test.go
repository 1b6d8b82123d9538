package server

import "testing"

// A label's value is escaped once, as the exposition format says: a quote,
// a backslash and a newline, and nothing else.
func TestSeriesEscapes(t *testing.T) {
	got := series("cordon_commands_total", "agent", "a\"b\\c\nd", "status", "ok")
	want := `cordon_commands_total{agent="a\"b\\c\nd",status="ok"}`
	if got != want {
		t.Errorf("series = %s; want %s", got, want)
	}
}
