//go:build !linux

package probe

// Battery is empty outside Linux.
func Battery() []Probe { return nil }
