package gateway

// SetMaxStates sets maxStates for a test, and returns what restores it.
func SetMaxStates(n int) func() {
	old := maxStates
	maxStates = n
	return func() { maxStates = old }
}
