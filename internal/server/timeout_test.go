package server

import (
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

func TestTimeout(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "30s": 30 * time.Second, "1m30s": 90 * time.Second, "1ms": time.Millisecond} {
		if d, err := parseTimeout(in); err != nil || d != want {
			t.Errorf("parseTimeout(%q) = %v, %v; want %v", in, d, err, want)
		}
	}
	for _, in := range []string{"30", "-1s", "0s", "1us", "soon"} {
		if _, err := parseTimeout(in); err == nil || !strings.Contains(err.Error(), "timeout: want a duration") {
			t.Errorf("parseTimeout(%q) = %v, want refused", in, err)
		}
	}
	p := &profile.Profile{}
	p.Resources.Wall = profile.Quantity{N: int64(time.Minute)}
	if err := checkTimeout(time.Minute, p); err != nil {
		t.Errorf("a timeout equal to the wall limit: %v", err)
	}
	if err := checkTimeout(time.Minute+time.Second, p); err == nil || !strings.Contains(err.Error(), "longer than the profile's wall limit") {
		t.Errorf("a timeout over the wall limit: %v", err)
	}
	if err := checkTimeout(time.Hour, &profile.Profile{}); err != nil {
		t.Errorf("no wall limit: %v", err)
	}
}
