package probe

import "testing"

// A mount the sandbox's set-up makes, left in the host's table, is one of
// the sandbox's; another program's mount meanwhile is not.
func TestSandboxMount(t *testing.T) {
	for entry, want := range map[string]bool{
		"/tmp tmpfs":                       true, // the root, assembled over /tmp
		"/tmp/proc proc":                   true,
		"/dev/shm tmpfs":                   true,
		"/var/lib/cordon/sandboxes/x ext4": true,
		"/srv/x proc":                      true,
		"/tmp/TestFullDisk123/001 tmpfs":   false,
		"/mnt/backup ext4":                 false,
	} {
		if got := sandboxMount(entry); got != want {
			t.Errorf("%s: %v, want %v", entry, got, want)
		}
	}
	if len(mountEntries()) == 0 {
		t.Error("no mount entries read")
	}
}
