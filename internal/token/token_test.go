package token

import "testing"

func TestMatch(t *testing.T) {
	a, sa := New()
	b, sb := New()
	if a == b || len(a) != len(Prefix)+64 || !ValidSum(sa) || !ValidSum(sb) {
		t.Fatalf("tokens %q %q, sums %q %q", a, b, sa, sb)
	}
	sums := []string{sa, sb}
	for _, c := range []struct {
		token string
		want  int
	}{{a, 0}, {b, 1}, {" " + b + "\n", 1}, {"", -1}, {sa, -1}, {a + "x", -1}, {a[:len(a)-1], -1}} {
		if got := Match(c.token, sums); got != c.want {
			t.Errorf("Match(%q) = %d, want %d", c.token, got, c.want)
		}
	}
	for _, s := range []string{"", sa[:63], sa + "0", "AB" + sa[2:], "zz" + sa[2:]} {
		if ValidSum(s) {
			t.Errorf("ValidSum(%q) = true", s)
		}
	}
}
