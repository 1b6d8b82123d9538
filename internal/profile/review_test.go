package profile

import "testing"

// What the host's tools obey is held whatever the list says; the list
// adds to it.
func TestNeedsApprovalProtectedAlways(t *testing.T) {
	for _, tc := range []struct {
		list  []string
		flags []string
		kind  string
		want  string
	}{
		{[]string{}, []string{"protected"}, "modified", "protected"},
		{[]string{"executables"}, []string{"protected"}, "added", "protected"},
		{[]string{"executables"}, []string{"executable", "protected"}, "added", "executables"},
		{[]string{"deploy/**"}, nil, "added", ""},
		{[]string{}, []string{"binary"}, "added", ""},
		{[]string{"deletions"}, nil, "deleted", "deletions"},
	} {
		if got := (Review{RequireApproval: tc.list}).NeedsApproval("x", tc.kind, tc.flags); got != tc.want {
			t.Errorf("%v %v: held by %q, want %q", tc.list, tc.flags, got, tc.want)
		}
	}
}
