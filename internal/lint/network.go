package lint

import (
	"fmt"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/egress"
)

// openHosting are domains under which anyone can publish: a wildcard over
// one of them opens the whole internet's worth of other people's content.
var openHosting = []string{"co.uk", "com.au", "co.jp", "com.br", "github.io", "githubusercontent.com", "gitlab.io",
	"amazonaws.com", "s3.amazonaws.com", "cloudfront.net", "googleapis.com", "appspot.com", "web.app", "firebaseapp.com",
	"azurewebsites.net", "blob.core.windows.net", "herokuapp.com", "vercel.app", "netlify.app", "pages.dev", "workers.dev",
	"ngrok.io", "ngrok-free.app", "trycloudflare.com", "glitch.me", "repl.co", "onrender.com", "fly.dev"}

func init() {
	register(Rule{
		Code: "CL201", Name: "network-unscoped", Severity: Error,
		Summary: "an allow rule opens the network broadly: everything, a wide range, private addresses, or a wildcard over a shared hosting domain",
		Why:     "egress is the way data leaves; a rule that opens everything or anyone's hosting turns a manipulated agent's upload into a success",
		Fix:     "allow the exact hosts and ports the agent needs (api.example.com:443)",
		Check: func(c *Context, t *Target, r *Reporter) {
			for i, a := range t.Profile.Network.Allow {
				field := fmt.Sprintf("network.allow[%d].dest", i)
				rule, err := egress.ParseRule(a.Dest, false)
				if err != nil {
					continue
				}
				if msg := broad(rule); msg != "" {
					r.At(t, field, fmt.Sprintf("%s %s", a.Dest, msg), "")
				}
			}
		},
	})
}

// broad says what is wrong with an allow rule, or "".
func broad(rule egress.Rule) string {
	if p := rule.Prefix; p.IsValid() {
		bits := p.Bits()
		if p.Addr().Is6() {
			bits -= 96 // compare as much of the address space as IPv4's /8
		}
		special := egress.SpecialRange(p.Addr())
		switch {
		case p.Bits() == 0:
			return "opens every address"
		case special != "" && ((p.Addr().Is4() && p.Bits() < 24) || (p.Addr().Is6() && p.Bits() < 64)):
			return fmt.Sprintf("opens a %s range broadly (/%d)", special, p.Bits())
		case bits <= 8:
			return fmt.Sprintf("opens a /%d range of addresses", p.Bits())
		}
		return ""
	}
	if suffix, ok := strings.CutPrefix(rule.Host, "*."); ok {
		for _, h := range openHosting {
			if suffix == h {
				return fmt.Sprintf("opens every site under %s, where anyone can publish", h)
			}
		}
	}
	return ""
}
