package capdiff

import "github.com/cordon-sandbox/cordon/internal/profile"

// sizes compares the bounds of a call's arguments and of a result: a
// larger bound expands what a call may carry, a smaller one reduces it.
func (d *differ) sizes(o, n *profile.Profile) {
	for _, c := range []struct {
		field, what string
		o, n        int64
	}{
		{"session.max_argument_bytes", "largest arguments of a call", o.ArgumentCap(), n.ArgumentCap()},
		{"session.max_result_bytes", "largest results shown", o.ResultCap(), n.ResultCap()},
	} {
		if c.o == c.n {
			continue
		}
		k := Reduction
		if c.n > c.o {
			k = Expansion
		}
		os, ns := profile.FormatSize(c.o), profile.FormatSize(c.n)
		d.add(k, "session", c.field, os, ns, "the %s are %s (was %s)", c.what, ns, os)
	}
}
