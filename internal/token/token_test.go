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

// The scheme is matched in any case, the token trimmed; another scheme,
// or none, carries no token.
func TestBearer(t *testing.T) {
	for _, c := range []struct {
		header, want string
		ok           bool
	}{
		{"Bearer abc", "abc", true}, {"bearer abc", "abc", true}, {"BEARER  abc ", "abc", true}, {" bEaReR abc", "abc", true},
		{"Basic abc", "", false}, {"Bearerabc", "", false}, {"abc", "", false}, {"", "", false},
	} {
		if got, ok := Bearer(c.header); got != c.want || ok != c.ok {
			t.Errorf("Bearer(%q) = %q, %v; want %q, %v", c.header, got, ok, c.want, c.ok)
		}
	}
}
