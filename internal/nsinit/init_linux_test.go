package nsinit

import "testing"

// num_threads is read past the command's name, whatever it holds.
func TestThreadsOf(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want int
	}{
		{"42 (sh) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 3 0 100 1000 10", 3},
		{"42 (a) b (c) d) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 17 0 100", 17},
		{"42 (short) S 1 42", 1},
		{"no name here", 1},
		{"42 (x) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 lots 0", 1},
	} {
		if got := threadsOf([]byte(tc.stat)); got != tc.want {
			t.Errorf("%q: %d, want %d", tc.stat, got, tc.want)
		}
	}
}

// Counting the tasks allocates nothing (the Go runtime then has no cause
// to start a thread), and finds this process's own.
func TestTasks(t *testing.T) {
	if n := tasks(); n < 1 {
		t.Fatalf("tasks: %d", n)
	}
	if a := testing.AllocsPerRun(5, func() { tasks() }); a != 0 {
		t.Errorf("tasks allocates %v times", a)
	}
}
