package server

import (
	"fmt"
	"time"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// parseTimeout reads the timeout of an exec request: a duration such as
// "30s" or "2m30s" ("" for none), at least a millisecond.
func parseTimeout(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Millisecond {
		return 0, fmt.Errorf("timeout: want a duration of at least 1ms, such as 30s or 2m, found %q", s)
	}
	return d, nil
}

// checkTimeout refuses a command's timeout that is longer than the wall
// limit of the profile p, which every command of its sandboxes keeps to.
func checkTimeout(d time.Duration, p *profile.Profile) error {
	if w := p.Resources.Wall; d > 0 && w.Set() && d > w.Duration() {
		return fmt.Errorf("timeout: %v is longer than the profile's wall limit (%s), which bounds every command", d, w)
	}
	return nil
}
