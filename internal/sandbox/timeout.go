package sandbox

import (
	"time"

	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// commandClock is the clock that ends a command of a kept-alive sandbox:
// the profile's wall limit, or the command's own timeout when that is set
// and shorter. It returns the limit's name ("wall" or "timeout") and its
// duration, 0 when neither is set.
func commandClock(wall profile.Quantity, timeout time.Duration) (string, time.Duration) {
	if timeout > 0 && (!wall.Set() || timeout < wall.Duration()) {
		return "timeout", timeout
	}
	if wall.Set() {
		return "wall", wall.Duration()
	}
	return "", 0
}

// timeoutState is the limit state of a command's own timeout, with the
// share of it the command used.
func timeoutState(timeout time.Duration, wallMS int64) outcome.LimitState {
	used := float64(wallMS) / float64(max(timeout.Milliseconds(), 1))
	used = float64(int(used*1000+0.5)) / 1000
	return outcome.LimitState{Name: "timeout", Value: timeout.String(), EnforcedBy: "supervisor", Used: &used}
}
