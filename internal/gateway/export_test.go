package gateway

// SetMaxStates sets maxStates for a test, and returns what restores it.
func SetMaxStates(n int) func() {
	old := maxStates
	maxStates = n
	return func() { maxStates = old }
}

// SetMaxClientSessions sets maxClientSessions for a test, and returns what
// restores it.
func SetMaxClientSessions(n int) func() {
	old := maxClientSessions
	maxClientSessions = n
	return func() { maxClientSessions = old }
}
