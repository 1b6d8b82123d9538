package egress

// nameKey is what the decision on a name, before it is looked up, depends
// on besides the rules (Policy.CheckName).
type nameKey struct {
	host, method string
	port         uint16
}

// maxNames bounds the names whose decisions a proxy keeps (valid names, of
// at most 253 bytes): a sandbox that tries names without end cannot grow
// cordon by it; past it, names are decided afresh each time.
const maxNames = 4096

// maxMethod is the longest HTTP method a kept decision is for.
const maxMethod = 16

// checkName decides on a name before its lookup, once per name, port and
// method for the proxy's life: the decision is a pure function of the
// rules, which do not change while the proxy serves. Only valid names are
// kept. Nothing that depends on the lookup is kept: every address a name
// resolves to is checked on each connection.
func (p *Proxy) checkName(host string, port uint16, method string) (valid bool, d Decision) {
	k := nameKey{host: host, method: method, port: port}
	p.namesMu.Lock()
	d, ok := p.names[k]
	p.namesMu.Unlock()
	if ok {
		return true, d
	}
	if !validName(host) {
		// Not kept: a name that is not one may be long.
		return false, Decision{}
	}
	d = p.Policy.CheckName(Request{Host: host, Port: port, Method: method})
	if len(method) > maxMethod {
		return true, d // not kept: a method may be long
	}
	p.namesMu.Lock()
	if p.names == nil {
		p.names = map[nameKey]Decision{}
	}
	if len(p.names) < maxNames {
		p.names[k] = d
	}
	p.namesMu.Unlock()
	return true, d
}
