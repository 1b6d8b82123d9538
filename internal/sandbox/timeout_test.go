package sandbox

import (
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

func TestCommandClock(t *testing.T) {
	wall := profile.Quantity{N: int64(10 * time.Second)}
	tests := []struct {
		name    string
		wall    profile.Quantity
		timeout time.Duration
		limit   string
		d       time.Duration
	}{
		{"wall alone", wall, 0, "wall", 10 * time.Second},
		{"a shorter timeout", wall, 3 * time.Second, "timeout", 3 * time.Second},
		{"a longer timeout keeps the wall", wall, time.Minute, "wall", 10 * time.Second},
		{"an equal timeout is the wall", wall, 10 * time.Second, "wall", 10 * time.Second},
		{"a timeout without a wall", profile.Quantity{}, time.Second, "timeout", time.Second},
		{"neither", profile.Quantity{}, 0, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit, d := commandClock(tt.wall, tt.timeout)
			if limit != tt.limit || d != tt.d {
				t.Errorf("got %q %v, want %q %v", limit, d, tt.limit, tt.d)
			}
		})
	}
	if st := timeoutState(2*time.Second, 1000); st.Name != "timeout" || st.Value != "2s" || st.Used == nil || *st.Used != 0.5 {
		t.Errorf("timeoutState: %+v", st)
	}
}
