package lint

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/cordon-sandbox/cordon/internal/egress"
	"github.com/cordon-sandbox/cordon/internal/profile"
)

// knownProviders are model-inference endpoints, by host name (compiled
// when lint first needs it, not whenever cordon starts).
var knownProviders = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(api\.openai\.com|[a-z0-9-]+\.openai\.azure\.com|api\.anthropic\.com|` +
		`generativelanguage\.googleapis\.com|([a-z0-9-]+-)?aiplatform\.googleapis\.com|bedrock-runtime(-fips)?\.[a-z0-9-]+\.amazonaws\.com|` +
		`api\.mistral\.ai|api\.cohere\.(ai|com)|api\.groq\.com|api\.together\.(xyz|ai)|openrouter\.ai|api\.deepseek\.com|api\.x\.ai|` +
		`api\.fireworks\.ai|api-inference\.huggingface\.co|router\.huggingface\.co|api\.perplexity\.ai|models\.inference\.ai\.azure\.com|` +
		`api\.replicate\.com|inference\.cerebras\.ai|api\.cerebras\.ai)$`)
})

func init() {
	register(Rule{
		Code: "CL701", Name: "undeclared-provider", Severity: Error,
		Summary: "the sandbox can reach a known model-provider endpoint the profile does not declare in providers:",
		Why:     "inference on someone else's infrastructure is part of the system's boundary; an endpoint nobody accounted for is a gap in it",
		Fix:     "declare the provider (providers: name, endpoints, retention, region, isolation), or remove the destination",
		Check: func(c *Context, t *Target, r *Reporter) {
			for i, a := range t.Profile.Network.Allow {
				host := providerHost(a.Dest)
				if host == "" || declared(t.Profile, a.Dest) {
					continue
				}
				r.At(t, fmt.Sprintf("network.allow[%d].dest", i), fmt.Sprintf("%s is a model provider's endpoint (%s), not declared in providers:", a.Dest, host), "")
			}
		},
	})
	register(Rule{
		Code: "CL702", Name: "provider-without-guarantees", Severity: Warning,
		Summary: "a declared model provider states no data retention, region or isolation",
		Why:     "what happens to prompts and outputs on the provider's side decides whether the system can be used for this data at all",
		Fix:     "state the provider's retention, region and isolation, as its contract gives them",
		Check: func(c *Context, t *Target, r *Reporter) {
			for i, pr := range t.Profile.Providers {
				var missing []string
				for name, v := range map[string]string{"retention": pr.Retention, "region": pr.Region, "isolation": pr.Isolation} {
					if strings.TrimSpace(v) == "" {
						missing = append(missing, name)
					}
				}
				if len(missing) > 0 {
					slices.Sort(missing)
					r.At(t, fmt.Sprintf("providers[%d]", i), fmt.Sprintf("the provider %s states no %s", pr.Name, strings.Join(missing, ", ")), "")
				}
			}
		},
	})
}

// providerHost returns the model-provider host an allow rule reaches: the
// rule's own host, or, for a wildcard, a known endpoint under it.
func providerHost(dest string) string {
	rule, err := egress.ParseRule(dest, false)
	if err != nil || rule.Host == "" {
		return ""
	}
	if knownProviders().MatchString(rule.Host) {
		return rule.Host
	}
	if suffix, ok := strings.CutPrefix(rule.Host, "*."); ok {
		for _, h := range []string{"api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com", "api.mistral.ai", "api.cohere.com",
			"api.groq.com", "api.together.xyz", "api.deepseek.com", "api.x.ai", "api.fireworks.ai", "api-inference.huggingface.co", "api.perplexity.ai"} {
			if strings.HasSuffix(h, "."+suffix) {
				return h
			}
		}
	}
	return ""
}

// declared reports whether one of the profile's providers lists dest's
// host among its endpoints.
func declared(p *profile.Profile, dest string) bool {
	a, err := egress.ParseRule(dest, false)
	if err != nil {
		return false
	}
	for _, pr := range p.Providers {
		for _, e := range pr.Endpoints {
			if d, err := egress.ParseRule(e, false); err == nil && d.Host == a.Host {
				return true
			}
		}
	}
	return false
}
