package profile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/egress"
)

// Network is the sandbox's egress: nothing leaves unless allowed here, and
// then only through cordon's proxy.
type Network struct {
	Allow  []Destination `yaml:"allow,omitempty" json:"allow,omitempty"`
	Deny   []Destination `yaml:"deny,omitempty" json:"deny,omitempty"`
	Budget NetBudget     `yaml:"budget,omitempty" json:"budget,omitempty"`
	// Transparent also carries clients that ignore the proxy variables:
	// TCP to any address is captured in the sandbox and handed to the
	// proxy, and DNS is answered for allowed names only.
	Transparent bool `yaml:"transparent,omitempty" json:"transparent,omitempty"`
}

// Destination is one rule: a host, IP or CIDR with an optional port, and the
// HTTP methods allowed to it (plain HTTP only; tunnels are then refused).
type Destination struct {
	Dest    string   `yaml:"dest" json:"dest"`
	Methods []string `yaml:"methods,omitempty" json:"methods,omitempty"`
}

// NetBudget caps the egress of one run.
type NetBudget struct {
	BytesOut    Quantity `yaml:"bytes_out,omitempty" json:"bytes_out,omitempty"`
	BytesIn     Quantity `yaml:"bytes_in,omitempty" json:"bytes_in,omitempty"`
	Connections Quantity `yaml:"connections,omitempty" json:"connections,omitempty"`
	// MaxDenied is how many refused attempts (deny events) a run may
	// make; the one after uses it up. It has a default.
	MaxDenied Quantity `yaml:"max_denied,omitempty" json:"max_denied,omitempty"`
}

// DefaultMaxDenied is network.budget.max_denied when the profile does not
// set it.
const DefaultMaxDenied = "100"

var budgetSpecs = []LimitSpec{
	{"bytes_out", Bytes, "", 1, true, "bytes sent through the proxy"},
	{"bytes_in", Bytes, "", 1, true, "bytes received through the proxy"},
	{"connections", Count, "", 1, true, "connections opened through the proxy"},
	{"max_denied", Count, DefaultMaxDenied, 1, true, "connection attempts and lookups the proxy refused"},
}

var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

func (b *NetBudget) get(name string) *Quantity {
	switch name {
	case "bytes_out":
		return &b.BytesOut
	case "bytes_in":
		return &b.BytesIn
	case "max_denied":
		return &b.MaxDenied
	}
	return &b.Connections
}

// Value prints the budget named "bytes_out", "bytes_in", "connections" or
// "max_denied".
func (b *NetBudget) Value(name string) string { return b.get(name).String() }

// Enabled reports whether anything may leave the sandbox.
func (n *Network) Enabled() bool { return len(n.Allow) > 0 }

// AddAllow adds a destination for one run (--allow).
func (p *Profile) AddAllow(dest string) error {
	if _, err := egress.ParseRule(dest, false); err != nil {
		return err
	}
	p.Network.Allow = append(p.Network.Allow, Destination{Dest: dest})
	return nil
}

// Policy compiles the rules.
func (n *Network) Policy() (*egress.Policy, error) {
	pol := &egress.Policy{}
	for _, list := range []struct {
		dests []Destination
		deny  bool
	}{{n.Allow, false}, {n.Deny, true}} {
		for _, d := range list.dests {
			r, err := egress.ParseRule(d.Dest, list.deny)
			if err != nil {
				return nil, err
			}
			r.Methods = d.Methods
			if list.deny {
				pol.Deny = append(pol.Deny, r)
			} else {
				pol.Allow = append(pol.Allow, r)
			}
		}
	}
	return pol, nil
}

// validateNetwork checks the rules and the budget.
func (p *Profile) validateNetwork(bad func(field, format string, args ...any)) {
	n := &p.Network
	for _, list := range []struct {
		name  string
		dests []Destination
		deny  bool
	}{{"allow", n.Allow, false}, {"deny", n.Deny, true}} {
		for i := range list.dests {
			d := &list.dests[i]
			field := fmt.Sprintf("network.%s[%d]", list.name, i)
			if _, err := egress.ParseRule(d.Dest, list.deny); err != nil {
				bad(field+".dest", "%v", err)
			}
			if list.deny && d.Methods != nil {
				bad(field+".methods", "deny rules take no methods")
			}
			for j, m := range d.Methods {
				d.Methods[j] = strings.ToUpper(m)
				if !slices.Contains(httpMethods, d.Methods[j]) {
					bad(fmt.Sprintf("%s.methods[%d]", field, j), "%q is not an HTTP method (%s)", m, strings.Join(httpMethods, ", "))
				}
			}
		}
	}
	for _, spec := range budgetSpecs {
		q := n.Budget.get(spec.Name)
		text := q.text
		if text == "" && q.N == 0 && !q.Unlimited {
			text = spec.Default
		}
		if text == "" {
			q.kind = spec.Kind // unset without a default, or set in code
			continue
		}
		v, err := parseQuantity(spec, text)
		if err != nil {
			bad("network.budget."+spec.Name, "%v", err)
			continue
		}
		*q = v
	}
}
