package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func mustPolicy(t testing.TB, allow, deny []string) *Policy {
	t.Helper()
	p := &Policy{}
	for _, a := range allow {
		r, err := ParseRule(a, false)
		if err != nil {
			t.Fatalf("allow %q: %v", a, err)
		}
		p.Allow = append(p.Allow, r)
	}
	for _, d := range deny {
		r, err := ParseRule(d, true)
		if err != nil {
			t.Fatalf("deny %q: %v", d, err)
		}
		p.Deny = append(p.Deny, r)
	}
	return p
}

func TestParseRule(t *testing.T) {
	for _, tt := range []struct {
		text  string
		ok    bool
		host  string
		pfx   string
		ports []uint16
	}{
		{"api.github.com", true, "api.github.com", "", DefaultPorts},
		{"API.GitHub.com.:443", true, "api.github.com", "", []uint16{443}},
		{"*.pypi.org", true, "*.pypi.org", "", DefaultPorts},
		{"127.0.0.1:8080", true, "", "127.0.0.1/32", []uint16{8080}},
		{"10.1.2.0/24:5432", true, "", "10.1.2.0/24", []uint16{5432}},
		{"::1", true, "", "::1/128", DefaultPorts},
		{"[::1]:8080", true, "", "::1/128", []uint16{8080}},
		{"[fd00::/8]:443", true, "", "fd00::/8", []uint16{443}},
		{"*", false, "", "", nil},
		{"*.com", false, "", "", nil},
		{"a.*.com", false, "", "", nil},
		{"foo*.com", false, "", "", nil},
		{"0.0.0.0/0", false, "", "", nil},
		{"10.1.2.3/24", false, "", "", nil},
		{"host:0", false, "", "", nil},
		{"host:99999", false, "", "", nil},
		{"host:http", false, "", "", nil},
		{"bad host", false, "", "", nil},
		{"-bad.com", false, "", "", nil},
		{"", false, "", "", nil},
		{"[::1", false, "", "", nil},
	} {
		r, err := ParseRule(tt.text, false)
		if (err == nil) != tt.ok {
			t.Errorf("ParseRule(%q): error %v, want ok=%v", tt.text, err, tt.ok)
			continue
		}
		if !tt.ok {
			continue
		}
		if r.Host != tt.host || (tt.pfx != "" && r.Prefix.String() != tt.pfx) || len(r.Ports) != len(tt.ports) {
			t.Errorf("ParseRule(%q) = %+v", tt.text, r)
		}
	}
	// A deny rule without a port covers every port.
	if r, _ := ParseRule("evil.com", true); r.Ports != nil || !r.coversPort(22) {
		t.Errorf("deny rule ports: %v", r.Ports)
	}
}

func TestCheck(t *testing.T) {
	p := mustPolicy(t,
		[]string{"api.github.com", "*.pypi.org:443", "127.0.0.1:8080", "10.1.2.0/24:5432", "localhost:9000", "docs.example.org:80", "internal.corp"},
		[]string{"evil.pypi.org", "10.1.2.99"},
	)
	p.Allow[5].Methods = []string{"GET", "HEAD"}
	pub := netip.MustParseAddr("140.82.112.3")
	tests := []struct {
		name   string
		req    Request
		allow  bool
		reason string
	}{
		{"exact host, default port", Request{Host: "api.github.com", Port: 443, Addr: pub}, true, `allowed by the rule "api.github.com"`},
		{"exact host, other port", Request{Host: "api.github.com", Port: 22, Addr: pub}, false, "no rule allows api.github.com:22"},
		{"suffix", Request{Host: "files.pypi.org", Port: 443, Addr: pub}, true, ""},
		{"suffix is not the apex", Request{Host: "pypi.org", Port: 443, Addr: pub}, false, ""},
		{"suffix needs a dot boundary", Request{Host: "evilpypi.org", Port: 443, Addr: pub}, false, ""},
		{"deny wins over allow", Request{Host: "evil.pypi.org", Port: 443, Addr: pub}, false, `denied by the rule "evil.pypi.org"`},
		{"deny by address wins", Request{Host: "10.1.2.99", Port: 5432, Addr: netip.MustParseAddr("10.1.2.99")}, false, "denied"},
		{"cidr with port", Request{Host: "10.1.2.7", Port: 5432, Addr: netip.MustParseAddr("10.1.2.7")}, true, ""},
		{"loopback by explicit rule", Request{Host: "127.0.0.1", Port: 8080, Addr: netip.MustParseAddr("127.0.0.1")}, true, ""},
		{"loopback other port", Request{Host: "127.0.0.1", Port: 8081, Addr: netip.MustParseAddr("127.0.0.1")}, false, "loopback address"},
		{"metadata", Request{Host: "169.254.169.254", Port: 80, Addr: netip.MustParseAddr("169.254.169.254")}, false, "link-local (cloud metadata)"},
		{"metadata v6", Request{Host: "fd00:ec2::254", Port: 80, Addr: netip.MustParseAddr("fd00:ec2::254")}, false, "private"},
		{"name resolving to private", Request{Host: "internal.corp", Port: 443, Addr: netip.MustParseAddr("10.9.9.9")}, false, "resolves to 10.9.9.9, a private address"},
		{"name resolving to loopback, host:port rule", Request{Host: "localhost", Port: 9000, Addr: netip.MustParseAddr("127.0.0.1")}, true, ""},
		{"mapped v4 is still loopback", Request{Host: "::ffff:127.0.0.1", Port: 8081, Addr: netip.MustParseAddr("::ffff:127.0.0.1")}, false, "loopback"},
		{"raw public IP needs an address rule", Request{Host: "140.82.112.3", Port: 443, Addr: pub}, false, "raw IP address"},
		{"unresolved", Request{Host: "api.github.com", Port: 443}, false, "did not resolve"},
		{"method allowed", Request{Host: "docs.example.org", Port: 80, Addr: pub, Method: "GET"}, true, ""},
		{"method refused", Request{Host: "docs.example.org", Port: 80, Addr: pub, Method: "POST"}, false, "allows only GET, HEAD, not POST"},
		{"tunnel under a method rule", Request{Host: "docs.example.org", Port: 80, Addr: pub}, false, "cannot be checked"},
		{"an address rule does not cover a name", Request{Host: "db.example.com", Port: 5432, Addr: netip.MustParseAddr("10.1.2.7")}, false, "no rule allows db.example.com:5432"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := p.Check(tt.req)
			if d.Allow != tt.allow || !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("got %+v, want allow=%v reason containing %q", d, tt.allow, tt.reason)
			}
			if d.Reason == "" {
				t.Error("no reason")
			}
		})
	}
}

// CheckName refuses, before any lookup, every name no allow rule names on
// the port, and every name a deny rule names.
func TestCheckName(t *testing.T) {
	p := mustPolicy(t,
		[]string{"api.github.com", "*.pypi.org:443", "10.0.0.0/8:5432", "localhost:9000"},
		[]string{"evil.pypi.org", "10.1.2.99"},
	)
	for _, tt := range []struct {
		host   string
		port   uint16
		allow  bool
		reason string
	}{
		{"api.github.com", 443, true, `named by the rule "api.github.com"`},
		{"API.GitHub.com.", 80, true, ""},
		{"api.github.com", 22, false, "no rule allows api.github.com:22"},
		{"files.pypi.org", 443, true, ""},
		{"files.pypi.org", 80, false, "no rule allows"},
		{"evil.pypi.org", 443, false, `denied by the rule "evil.pypi.org"`},
		{"secret.attacker.example", 443, false, "no rule allows secret.attacker.example:443"},
		{"db.internal", 5432, false, "no rule allows"},
		{"localhost", 9000, true, ""},
		{"evil\x1b[31m.example", 443, false, `evil\x1b[31m.example:443`},
	} {
		d := p.CheckName(Request{Host: tt.host, Port: tt.port})
		if d.Allow != tt.allow || !strings.Contains(d.Reason, tt.reason) {
			t.Errorf("%q:%d: got %+v, want allow=%v reason containing %q", tt.host, tt.port, d, tt.allow, tt.reason)
		}
		if strings.ContainsAny(d.Reason, "\x1b\n") {
			t.Errorf("%q: a control character in the reason %q", tt.host, d.Reason)
		}
	}
}

func TestEmptyPolicyDeniesEverything(t *testing.T) {
	p := &Policy{}
	for _, h := range []string{"example.com", "127.0.0.1", "::1", "10.0.0.1"} {
		a, err := netip.ParseAddr(h)
		if err != nil {
			a = netip.MustParseAddr("93.184.216.34")
		}
		if d := p.Check(Request{Host: h, Port: 443, Addr: a}); d.Allow {
			t.Errorf("%s allowed by an empty policy", h)
		}
	}
}

// FuzzCheck: any rule that parses, and any request, gives a decision with a
// reason; a special address is never allowed by a host rule without a port;
// nothing is allowed by an empty allowlist.
func FuzzCheck(f *testing.F) {
	f.Add("api.github.com", "api.github.com", uint16(443), "140.82.112.3", "GET")
	f.Add("*.pypi.org:443", "a.pypi.org", uint16(443), "10.0.0.1", "")
	f.Add("10.0.0.0/8:5432", "10.1.1.1", uint16(5432), "10.1.1.1", "")
	f.Add("[::1]:80", "::1", uint16(80), "::1", "HEAD")
	f.Add("localhost:8080", "LOCALHOST.", uint16(8080), "127.0.0.1", "")
	f.Fuzz(func(t *testing.T, rule, host string, port uint16, addr, method string) {
		r, err := ParseRule(rule, false)
		a, aerr := netip.ParseAddr(addr)
		if aerr != nil {
			a = netip.Addr{}
		}
		req := Request{Host: host, Port: port, Addr: a, Method: method}
		if d := (&Policy{}).Check(req); d.Allow || d.Reason == "" {
			t.Fatalf("empty policy: %+v", d)
		}
		if err != nil {
			return
		}
		if r.Host == "" && !r.Prefix.IsValid() {
			t.Fatalf("rule %q parsed to nothing: %+v", rule, r)
		}
		if r.Host == "*" || r.Prefix.IsValid() && r.Prefix.Bits() == 0 {
			t.Fatalf("rule %q allows everything", rule)
		}
		d := (&Policy{Allow: []Rule{r}}).Check(req)
		if d.Reason == "" {
			t.Fatal("no reason")
		}
		if d.Allow && a.IsValid() && SpecialRange(a) != "" && r.Host != "" && !r.ExplicitPort {
			t.Fatalf("rule %q opened special address %s", rule, a)
		}
		if d.Allow && !a.IsValid() {
			t.Fatalf("allowed without an address")
		}
		if d.Allow && r.Host != "" {
			if _, err := netip.ParseAddr(host); err == nil {
				t.Fatalf("host rule %q allowed raw IP %s", rule, host)
			}
		}
		// A deny rule for the same destination always wins.
		if dr, err := ParseRule(rule, true); err == nil {
			if d := (&Policy{Allow: []Rule{r}, Deny: []Rule{dr}}).Check(req); d.Allow {
				t.Fatalf("deny %q did not win", rule)
			}
		}
	})
}

// BenchmarkCheck decides a request against a policy of a realistic size.
func BenchmarkCheck(b *testing.B) {
	var allow []Rule
	for _, text := range []string{"pypi.org:443", "files.pythonhosted.org:443", "*.github.com:443", "registry.npmjs.org:443",
		"proxy.golang.org:443", "10.1.2.0/24:5432", "api.example.com", "*.s3.eu-west-1.amazonaws.com:443"} {
		r, err := ParseRule(text, false)
		if err != nil {
			b.Fatal(err)
		}
		allow = append(allow, r)
	}
	deny, _ := ParseRule("*.internal.example.com", true)
	p := &Policy{Allow: allow, Deny: []Rule{deny}}
	req := Request{Host: "objects.github.com", Port: 443, Addr: netip.MustParseAddr("140.82.112.4")}
	for b.Loop() {
		if !p.Check(req).Allow {
			b.Fatal("denied")
		}
	}
}
