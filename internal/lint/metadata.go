package lint

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/egress"
)

// metadataRanges are the addresses of cloud metadata services and the
// link-local ranges they live in, most specific first: what answers there
// hands out the host's identity and credentials. Only what an allowlist
// writes literally is compared; no name is looked up.
var metadataRanges = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("169.254.169.254/32"), "the cloud instance metadata service (AWS, GCP, Azure, OpenStack and others), which hands out the host's credentials"},
	{netip.MustParsePrefix("169.254.170.2/32"), "the AWS ECS task metadata service, which hands out the task's credentials"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "the AWS instance metadata service over IPv6, which hands out the host's credentials"},
	{netip.MustParsePrefix("100.100.100.200/32"), "the Alibaba Cloud metadata service, which hands out the host's credentials"},
	{netip.MustParsePrefix("169.254.0.0/16"), "IPv4 link-local, where cloud metadata services and the host's own link answer"},
	{netip.MustParsePrefix("fe80::/10"), "IPv6 link-local, where the host's own link answers"},
}

// metadataNames are the names of metadata services, resolved by the
// cloud's own DNS.
var metadataNames = []struct{ name, what string }{
	{"metadata.google.internal", "the GCP metadata service, which hands out the host's credentials"},
	{"metadata.goog", "the GCP metadata service, which hands out the host's credentials"},
	{"instance-data.ec2.internal", "the AWS instance metadata service, which hands out the host's credentials"},
}

func init() {
	register(Rule{
		Code: "CL202", Name: "network-metadata", Severity: Error,
		Summary: "an allow rule reaches a cloud metadata service or a link-local address",
		Why:     "a metadata service gives whoever asks the host's cloud credentials; a sandboxed agent that can reach it can act as the host",
		Fix:     "remove the rule: pass the agent the one credential it needs (env, or a provider) instead of the host's",
		Check: func(c *Context, t *Target, r *Reporter) {
			for i, a := range t.Profile.Network.Allow {
				rule, err := egress.ParseRule(a.Dest, false)
				if err != nil {
					continue
				}
				if msg := metadata(rule); msg != "" {
					r.At(t, fmt.Sprintf("network.allow[%d].dest", i), a.Dest+" "+msg, "")
				}
			}
		},
	})
}

// metadata says which metadata service or link-local range an allow rule
// reaches, or "".
func metadata(rule egress.Rule) string {
	if p := rule.Prefix; p.IsValid() {
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		for _, m := range metadataRanges {
			switch {
			case m.prefix.Bits() <= p.Bits() && m.prefix.Contains(p.Addr()):
				return "is " + m.what
			case p.Overlaps(m.prefix):
				return fmt.Sprintf("includes %s: %s", m.prefix.Masked(), m.what)
			}
		}
		return ""
	}
	for _, m := range metadataNames {
		if rule.Host == m.name {
			return "is " + m.what
		}
		if suffix, ok := strings.CutPrefix(rule.Host, "*."); ok && strings.HasSuffix(m.name, "."+suffix) {
			return fmt.Sprintf("includes %s: %s", m.name, m.what)
		}
	}
	return ""
}
