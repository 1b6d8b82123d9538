//go:build !linux

package protect

// SensitiveIn is Sensitive: without Linux, no index is kept.
func SensitiveIn(root, index string) string { return Sensitive(root) }
