// Package secretscan finds credentials in text: well-known key and token
// formats (cloud, forge and chat tokens, payment keys, private key PEM
// blocks, JWTs), assignments of passwords and API keys, and long tokens
// whose characters look random. The gateway uses it to keep credentials out
// of the audit log and to label a session that was shown one.
//
// The format rules are those of gitleaks (github.com/gitleaks/gitleaks,
// config/gitleaks.toml of v8.30.1, MIT licence, copyright (c) 2019 Zachary
// Rice), narrowed to RE2 and to the formats an agent's tools are likely to
// meet; the library itself is not imported, as it brings some seventy
// modules (archive formats, a CLI framework, a WebAssembly runtime) into a
// security boundary that needs a few regular expressions.
package secretscan

import (
	"encoding/base64"
	"math"
	"regexp"
	"slices"
	"strings"
)

// Finding is one credential found: the rule that matched and where.
type Finding struct {
	Rule       string
	Start, End int // byte offsets of the secret in the scanned text
}

// rule is a format; group is the submatch that is the secret (0: all).
type rule struct {
	id    string
	re    *regexp.Regexp
	group int
	// keep, when set, rejects a match that is not a secret.
	keep func(string) bool
}

// end is what may follow a token: a quote, a space, a semicolon, an
// escaped newline (in JSON) or the end of the text.
const end = `(?:[\x60'"\s;,]|\\[nrt]|$)`

var rules = []rule{
	{id: "aws-access-token", re: regexp.MustCompile(`\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b`), group: 1},
	{id: "github-pat", re: regexp.MustCompile(`\b(gh[pousr]_[0-9a-zA-Z]{36})\b`), group: 1},
	{id: "github-fine-grained-pat", re: regexp.MustCompile(`\b(github_pat_\w{82})\b`), group: 1},
	{id: "gitlab-token", re: regexp.MustCompile(`\b(gl(?:pat|dt|ptt|rt|cbt|oas|soat|ft|imt|agent)-[\w-]{20,})`), group: 1},
	{id: "slack-token", re: regexp.MustCompile(`\b(xox[baprse]-[0-9]{10,13}-[0-9A-Za-z-]{10,})`), group: 1},
	{id: "slack-app-token", re: regexp.MustCompile(`(?i)\b(xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+)`), group: 1},
	{id: "slack-webhook-url", re: regexp.MustCompile(`hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}`)},
	{id: "stripe-access-token", re: regexp.MustCompile(`\b((?:sk|rk)_(?:test|live|prod)_[a-zA-Z0-9]{10,99})` + end), group: 1},
	{id: "gcp-api-key", re: regexp.MustCompile(`\b(AIza[\w-]{35})` + end), group: 1},
	{id: "openai-api-key", re: regexp.MustCompile(`\b(sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{58,74}T3BlbkFJ[A-Za-z0-9_-]{58,74}|sk-[a-zA-Z0-9]{20}T3BlbkFJ[a-zA-Z0-9]{20})`), group: 1},
	{id: "anthropic-api-key", re: regexp.MustCompile(`\b(sk-ant-(?:api|admin)\d\d-[a-zA-Z0-9_\-]{80,100})`), group: 1},
	{id: "npm-access-token", re: regexp.MustCompile(`(?i)\b(npm_[a-z0-9]{36})` + end), group: 1},
	{id: "private-key", re: regexp.MustCompile(`(?i)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S]{64,}?-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----`)},
	// A private key cut short (a preview, a truncated read) is still one.
	{id: "private-key", re: regexp.MustCompile(`(?i)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?:\\n|\s)*[A-Za-z0-9+/=]{16,}`)},
	{id: "jwt", re: regexp.MustCompile(`\b(ey[a-zA-Z0-9]{17,}\.ey[a-zA-Z0-9/\\_-]{17,}\.(?:[a-zA-Z0-9/\\_-]{10,}={0,2})?)` + end), group: 1},
	// password=..., "api_key": "...", SECRET_TOKEN: ...: the value of an
	// assignment to a name that says it holds a credential.
	{id: "generic-credential", re: regexp.MustCompile(`(?i)(?:passw(?:or)?d|passwd|pwd|secret|api[_.-]?key|apikey|access[_.-]?key|auth[_.-]?token|access[_.-]?token|private[_.-]?key|client[_.-]?secret|credentials?|token)(?:[\w.-]{0,20})(?:\\?["'])?[ \t]{0,3}(?:=|:=|:|=>)[ \t]{0,3}(?:\\?["'\x60])?([^\s"'\x60;,\\<>(){}\[\]]{8,200})`), group: 1, keep: credentialValue},
	// A long token of random-looking characters (base64, base62).
	{id: "high-entropy-token", re: regexp.MustCompile(`[A-Za-z0-9+/_=-]{32,}`), keep: randomToken},
}

// Scan returns the credentials in text, in order, at most limit of them (0
// is no limit); overlapping findings are reported once.
func Scan(text []byte, limit int) []Finding {
	var out []Finding
	s := string(text)
	for _, r := range rules {
		for _, m := range r.re.FindAllStringSubmatchIndex(s, -1) {
			start, stop := m[2*r.group], m[2*r.group+1]
			if start < 0 {
				continue
			}
			if r.keep != nil && !r.keep(s[start:stop]) {
				continue
			}
			out = append(out, Finding{Rule: r.id, Start: start, End: stop})
		}
	}
	slices.SortFunc(out, func(a, b Finding) int {
		if a.Start != b.Start {
			return a.Start - b.Start
		}
		return b.End - a.End
	})
	// Keep the first of findings that overlap (the longest at a start).
	kept := out[:0]
	for _, f := range out {
		if n := len(kept); n > 0 && f.Start < kept[n-1].End {
			continue
		}
		kept = append(kept, f)
		if limit > 0 && len(kept) == limit {
			break
		}
	}
	return kept
}

// Found reports whether text holds a credential, and the rule of the first.
func Found(text []byte) (rule string, ok bool) {
	fs := Scan(text, 1)
	if len(fs) == 0 {
		return "", false
	}
	return fs[0].Rule, true
}

// credentialValue tells the value of a password or key assignment from
// code that names one: a value made only of letters (a variable, a word
// such as "required") or a placeholder is not a credential.
func credentialValue(v string) bool {
	l := strings.ToLower(v)
	for _, p := range []string{"xxxx", "****", "changeme", "example", "placeholder", "your_", "your-", "redacted", "dummy", "$"} {
		if strings.Contains(l, p) {
			return false
		}
	}
	letters, other := 0, 0
	for _, c := range v {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '.':
			letters++
		default:
			other++
		}
	}
	if other == 0 {
		// An identifier (os.Getenv, config.password) or a word.
		return false
	}
	return entropy(v) >= 2.5
}

// randomToken says a long token looks random: it mixes upper case, lower
// case and digits, its characters are spread (Shannon entropy of at least
// 4.3 bits each; hex, such as a git hash or a SHA-256, stays below 4), and
// it is not base64 of readable text.
func randomToken(v string) bool {
	upper, lower, digit := 0, 0, 0
	for _, c := range v {
		switch {
		case c >= 'A' && c <= 'Z':
			upper++
		case c >= 'a' && c <= 'z':
			lower++
		case c >= '0' && c <= '9':
			digit++
		}
	}
	if upper < 3 || lower < 3 || digit < 3 {
		return false
	}
	if entropy(v) < 4.3 {
		return false
	}
	return !base64Text(v)
}

// base64Text reports whether v decodes, as base64, to readable text.
func base64Text(v string) bool {
	v = strings.TrimRight(v, "=")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		// A token cut out of a longer one may not end on a boundary.
		for cut := 0; cut < 4 && cut < len(v); cut++ {
			b, err := enc.DecodeString(v[:len(v)-cut])
			if err != nil {
				continue
			}
			printable := 0
			for _, c := range b {
				if c == '\n' || c == '\t' || c == '\r' || (c >= 0x20 && c < 0x7f) {
					printable++
				}
			}
			return len(b) > 0 && printable*100 >= len(b)*95
		}
	}
	return false
}

// entropy is the Shannon entropy of v, in bits per character.
func entropy(v string) float64 {
	if v == "" {
		return 0
	}
	var counts [256]int
	for i := 0; i < len(v); i++ {
		counts[v[i]]++
	}
	h, n := 0.0, float64(len(v))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}
