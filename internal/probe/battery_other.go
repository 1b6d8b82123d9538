//go:build !linux

package probe

// Battery is empty outside Linux.
func Battery() []Probe { return nil }

// EgressBattery is empty outside Linux.
func EgressBattery() []Probe { return nil }

// HostBattery is empty outside Linux.
func HostBattery() []HostProbe { return nil }

// Attack has nothing to run outside Linux.
func Attack([]string) int { return 2 }
