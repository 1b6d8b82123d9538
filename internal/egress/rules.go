// Package egress decides and carries the sandbox's outbound connections:
// an allowlist of destinations (host names exact or by suffix, IP addresses
// and CIDR ranges, ports, HTTP methods), deny rules first, a name looked up
// only when an allow rule names it and every address it resolves to checked,
// private, loopback, link-local and other special addresses refused unless a
// rule names them; and the proxy, run by cordon outside the sandbox, that
// applies it and checks what its tunnels carry, bounded on the host whatever
// the sandbox sends. The rules are pure and fuzzed.
package egress

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// DefaultPorts are the ports of a rule that names none: the web.
var DefaultPorts = []uint16{80, 443}

// Rule is one destination of an allow or deny list.
type Rule struct {
	// Text is the rule as written, for messages.
	Text string
	// Host is an exact name ("api.github.com") or a suffix pattern
	// ("*.pypi.org"); empty for address rules.
	Host string
	// Prefix is the address range of an IP or CIDR rule.
	Prefix netip.Prefix
	// Ports the rule covers; nil means any port (deny rules without a port).
	Ports []uint16
	// ExplicitPort reports that the rule names its port.
	ExplicitPort bool
	// Methods restricts plain HTTP requests to these methods; nil: any.
	Methods []string
}

// ParseRule reads a destination: "name[:port]", "*.suffix[:port]",
// "ip[:port]", "[ipv6][:port]", "cidr" or "[cidr]:port". A port may be
// a single port. Without a port an allow rule covers DefaultPorts and a deny
// rule every port.
func ParseRule(text string, deny bool) (Rule, error) {
	r := Rule{Text: text}
	t := strings.TrimSpace(text)
	if t == "" {
		return r, fmt.Errorf("empty destination")
	}
	hostPart, portPart, err := splitHostPort(t)
	if err != nil {
		return r, err
	}
	if portPart != "" {
		p, err := strconv.ParseUint(portPart, 10, 16)
		if err != nil || p == 0 {
			return r, fmt.Errorf("%q: %q is not a port (1-65535)", text, portPart)
		}
		r.Ports, r.ExplicitPort = []uint16{uint16(p)}, true
	} else if !deny {
		r.Ports = slices.Clone(DefaultPorts)
	}
	if pfx, err := netip.ParsePrefix(hostPart); err == nil {
		if pfx.Masked() != pfx {
			return r, fmt.Errorf("%q: %s has host bits set; write %s", text, pfx, pfx.Masked())
		}
		if pfx.Bits() == 0 && !deny {
			return r, fmt.Errorf("%q: a rule for every address is not an allowlist", text)
		}
		r.Prefix = pfx
		return r, nil
	}
	if addr, err := netip.ParseAddr(hostPart); err == nil {
		if addr.Zone() != "" {
			return r, fmt.Errorf("%q: zoned addresses are not supported", text)
		}
		r.Prefix = netip.PrefixFrom(addr, addr.BitLen())
		return r, nil
	}
	host, err := normalizeHost(hostPart)
	if err != nil {
		return r, fmt.Errorf("%q: %w", text, err)
	}
	r.Host = host
	return r, nil
}

// splitHostPort separates an optional port. "[...]" brackets an IPv6
// address or prefix; an unbracketed text with more than one colon is an IPv6
// address without a port.
func splitHostPort(t string) (host, port string, err error) {
	if strings.HasPrefix(t, "[") {
		end := strings.Index(t, "]")
		if end < 0 {
			return "", "", fmt.Errorf("%q: missing ]", t)
		}
		host, rest := t[1:end], t[end+1:]
		if rest == "" {
			return host, "", nil
		}
		if !strings.HasPrefix(rest, ":") {
			return "", "", fmt.Errorf("%q: unexpected %q after ]", t, rest)
		}
		return host, rest[1:], nil
	}
	if strings.Count(t, ":") > 1 {
		return t, "", nil
	}
	if h, p, ok := strings.Cut(t, ":"); ok {
		return h, p, nil
	}
	return t, "", nil
}

// normalizeHost checks a host name or "*.suffix" pattern and lowers it.
func normalizeHost(h string) (string, error) {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "*" {
		return "", fmt.Errorf("a bare * would allow every host; name the hosts")
	}
	name := h
	if strings.HasPrefix(h, "*.") {
		name = h[2:]
		if !strings.Contains(name, ".") {
			return "", fmt.Errorf("a wildcard needs at least two labels after it (*.example.com), not a top-level domain")
		}
	} else if strings.Contains(h, "*") {
		return "", fmt.Errorf("a wildcard may only be the whole first label (*.example.com)")
	}
	if name == "" || len(name) > 253 {
		return "", fmt.Errorf("not a host name")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", fmt.Errorf("%q is not a valid host name", h)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("%q is not a valid host name", h)
			}
		}
	}
	return h, nil
}

// matchesHost reports whether the rule's host pattern covers name.
func (r Rule) matchesHost(name string) bool {
	if r.Host == "" || name == "" {
		return false
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if suffix, ok := strings.CutPrefix(r.Host, "*."); ok {
		return strings.HasSuffix(name, "."+suffix)
	}
	return name == r.Host
}

func (r Rule) coversPort(port uint16) bool {
	return r.Ports == nil || slices.Contains(r.Ports, port)
}

// Policy is a compiled allow and deny list.
type Policy struct {
	Allow []Rule
	Deny  []Rule
}

// Request is one connection attempt, after name resolution.
type Request struct {
	// Host is the destination as the client named it: a name or an IP.
	Host string
	Port uint16
	// Addr is the address the connection would go to.
	Addr netip.Addr
	// Method is the HTTP method of a plain HTTP request; empty for a
	// tunnel (CONNECT, SOCKS), whose method cannot be seen.
	Method string
}

// Decision is the verdict on a Request.
type Decision struct {
	Allow bool
	// Rule is the rule that decided, as written; empty for the default.
	Rule   string
	Reason string
}

// CheckName decides, before any lookup, whether the name r.Host may be
// looked up at all: a deny rule naming it on r.Port refuses it, and so does
// the lack of an allow rule naming it on that port (an address rule covers
// addresses, never the names that resolve into it). Allow means only that
// the lookup may be made; Check then decides on each address. A name refused
// here never reaches the host's resolver, so that the sandbox cannot send
// data out in the names it asks for. r.Addr is not used.
func (p *Policy) CheckName(r Request) Decision {
	dest := fmt.Sprintf("%s:%d", safeName(r.Host), r.Port)
	for _, rule := range p.Deny {
		if rule.coversPort(r.Port) && rule.matchesHost(r.Host) {
			return Decision{Rule: rule.Text, Reason: fmt.Sprintf("%s is denied by the rule %q", dest, rule.Text)}
		}
	}
	for _, rule := range p.Allow {
		if rule.coversPort(r.Port) && rule.matchesHost(r.Host) {
			return Decision{Allow: true, Rule: rule.Text, Reason: fmt.Sprintf("%s is named by the rule %q", dest, rule.Text)}
		}
	}
	return Decision{Reason: fmt.Sprintf("no rule allows %s (--allow %s would)", dest, suggest(r))}
}

// Check decides a request: deny rules first, then, for a name, CheckName,
// then the special addresses (which only a rule naming them explicitly
// opens), then the allow rules; nothing else passes.
func (p *Policy) Check(r Request) Decision {
	hostIsIP := false
	if a, err := netip.ParseAddr(r.Host); err == nil && a.Zone() == "" {
		hostIsIP = true
	}
	dest := fmt.Sprintf("%s:%d", safeName(r.Host), r.Port)
	for _, rule := range p.Deny {
		if rule.coversPort(r.Port) && (rule.matchesHost(r.Host) || (r.Addr.IsValid() && rule.Prefix.IsValid() && rule.Prefix.Contains(r.Addr.Unmap()))) {
			return Decision{Rule: rule.Text, Reason: fmt.Sprintf("%s is denied by the rule %q", dest, rule.Text)}
		}
	}
	if !hostIsIP {
		if d := p.CheckName(r); !d.Allow {
			return d
		}
	}
	if !r.Addr.IsValid() {
		return Decision{Reason: fmt.Sprintf("%s did not resolve to an address", dest)}
	}
	addr := r.Addr.Unmap()
	special := SpecialRange(addr)
	for _, rule := range p.Allow {
		if !rule.coversPort(r.Port) {
			continue
		}
		var ok bool
		switch {
		case rule.Prefix.IsValid():
			// Address rules cover raw IPs and what a name some host rule
			// names resolved to, special ranges included: they name the
			// address explicitly.
			ok = rule.Prefix.Contains(addr)
		case hostIsIP:
			// A raw IP needs an address rule.
		case rule.matchesHost(r.Host):
			// A name resolving to a special address needs host:port.
			ok = special == "" || rule.ExplicitPort
		}
		if !ok {
			continue
		}
		if rule.Methods != nil {
			if r.Method == "" {
				return Decision{Rule: rule.Text, Reason: fmt.Sprintf("%s: the rule %q allows only %s, and a tunnelled connection's method cannot be checked", dest, rule.Text, strings.Join(rule.Methods, ", "))}
			}
			if !slices.Contains(rule.Methods, strings.ToUpper(r.Method)) {
				return Decision{Rule: rule.Text, Reason: fmt.Sprintf("%s: the rule %q allows only %s, not %s", dest, rule.Text, strings.Join(rule.Methods, ", "), r.Method)}
			}
		}
		return Decision{Allow: true, Rule: rule.Text, Reason: fmt.Sprintf("%s is allowed by the rule %q", dest, rule.Text)}
	}
	switch {
	case special != "" && hostIsIP:
		return Decision{Reason: fmt.Sprintf("%s is a %s address; only an IP or CIDR rule naming it opens it (--allow %s)", dest, special, suggest(r))}
	case special != "":
		return Decision{Reason: fmt.Sprintf("%s resolves to %s, a %s address; only a rule naming it with its port opens it (--allow %s)", dest, addr, special, suggest(r))}
	case hostIsIP:
		return Decision{Reason: fmt.Sprintf("%s is a raw IP address; it needs an IP or CIDR rule (--allow %s)", dest, suggest(r))}
	}
	return Decision{Reason: fmt.Sprintf("no rule allows %s (--allow %s would)", dest, suggest(r))}
}

// suggest writes the rule that would allow r.
func suggest(r Request) string {
	if a, err := netip.ParseAddr(r.Host); err == nil && a.Is6() && !a.Is4In6() {
		return fmt.Sprintf("[%s]:%d", a, r.Port)
	}
	return fmt.Sprintf("%s:%d", safeName(r.Host), r.Port)
}

// specialRanges are address ranges that are never reached by a name or an
// unqualified rule: they reach the host itself, its neighbours, cloud
// metadata services, or nothing routable.
var specialRanges = []struct {
	prefix netip.Prefix
	kind   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (cloud metadata)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fc00::/7"), "private (unique local, incl. fd00:ec2::254 metadata)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64"},
}

// SpecialRange names the special range addr is in, or "".
func SpecialRange(addr netip.Addr) string {
	addr = addr.Unmap()
	for _, s := range specialRanges {
		if s.prefix.Contains(addr) {
			return s.kind
		}
	}
	return ""
}
