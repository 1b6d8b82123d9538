package egress

import (
	"net/netip"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

func query(t *testing.T, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	m := dnsmessage.Message{Header: dnsmessage.Header{ID: 7, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}}}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDNSAnswersAllowedNamesOnly(t *testing.T) {
	p := &Proxy{Policy: mustPolicy(t, []string{"api.github.com", "*.pypi.org:443"}, []string{"evil.pypi.org"})}
	answer := func(name string, typ dnsmessage.Type) dnsmessage.Message {
		var m dnsmessage.Message
		if err := m.Unpack(p.answerDNS(query(t, name, typ))); err != nil {
			t.Fatal(err)
		}
		if m.ID != 7 || !m.Response {
			t.Fatalf("header %+v", m.Header)
		}
		return m
	}
	m := answer("api.github.com.", dnsmessage.TypeA)
	if m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 1 {
		t.Fatalf("allowed name: %+v", m)
	}
	a := netip.AddrFrom4(m.Answers[0].Body.(*dnsmessage.AResource).A)
	if !FakeNet.Contains(a) {
		t.Errorf("answer %s outside %s", a, FakeNet)
	}
	if name, ok := p.nameOf(a); !ok || name != "api.github.com" {
		t.Errorf("fake %s stands for %q", a, name)
	}
	// The same name keeps its address; another gets another.
	if again := answer("API.GitHub.com.", dnsmessage.TypeA); netip.AddrFrom4(again.Answers[0].Body.(*dnsmessage.AResource).A) != a {
		t.Error("the same name got a new address")
	}
	if b := answer("files.pypi.org.", dnsmessage.TypeA); netip.AddrFrom4(b.Answers[0].Body.(*dnsmessage.AResource).A) == a {
		t.Error("two names share an address")
	}
	if m := answer("api.github.com.", dnsmessage.TypeAAAA); m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 0 {
		t.Errorf("AAAA: %+v", m)
	}
	for _, name := range []string{"example.org.", "evil.pypi.org.", "pypi.org."} {
		if m := answer(name, dnsmessage.TypeA); m.RCode != dnsmessage.RCodeNameError || len(m.Answers) != 0 {
			t.Errorf("%s: %+v", name, m)
		}
	}
	if p.answerDNS([]byte("garbage")) != nil {
		t.Error("answered garbage")
	}
}
