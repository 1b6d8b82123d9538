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
	"sync"
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
	// The regular expression runs only near its keywords (lower case): a
	// match starts at most one byte before one and ends within span bytes
	// of it. Without keywords, it runs on the whole text.
	keywords []string
	span     int
	// lead is how far before its keyword a match may start (0: a byte).
	lead int
}

// end is what may follow a token: a quote, a space, a semicolon, a comma,
// a backslash (an escaped newline in JSON, escaped once or more) or the end
// of the text.
const end = `(?:[\x60'"\s;,\\]|$)`

// rules are compiled on first use: most cordon processes scan nothing.
var rules = sync.OnceValue(func() []rule {
	return []rule{
		{id: "aws-access-token", re: regexp.MustCompile(`\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b`), group: 1, keywords: []string{"a3t", "akia", "asia", "abia", "acca"}, span: 24},
		{id: "github-pat", re: regexp.MustCompile(`\b(gh[pousr]_[0-9a-zA-Z]{36})\b`), group: 1, keywords: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, span: 48},
		{id: "github-fine-grained-pat", re: regexp.MustCompile(`\b(github_pat_\w{82})\b`), group: 1, keywords: []string{"github_pat_"}, span: 100},
		{id: "gitlab-token", re: regexp.MustCompile(`\b(gl(?:pat|dt|ptt|rt|cbt|oas|soat|ft|imt|agent)-[\w-]{20,})`), group: 1, keywords: []string{"glpat-", "gldt-", "glptt-", "glrt-", "glcbt-", "gloas-", "glsoat-", "glft-", "glimt-", "glagent-"}, span: 300},
		{id: "slack-token", re: regexp.MustCompile(`\b(xox[baprse]-[0-9]{10,13}-[0-9A-Za-z-]{10,})`), group: 1, keywords: []string{"xoxb-", "xoxa-", "xoxp-", "xoxr-", "xoxs-", "xoxe-"}, span: 300},
		{id: "slack-app-token", re: regexp.MustCompile(`(?i)\b(xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+)`), group: 1, keywords: []string{"xapp-"}, span: 300},
		{id: "slack-webhook-url", re: regexp.MustCompile(`hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}`), keywords: []string{"hooks.slack.com/"}, span: 100},
		{id: "stripe-access-token", re: regexp.MustCompile(`\b((?:sk|rk)_(?:test|live|prod)_[a-zA-Z0-9]{10,99})` + end), group: 1, keywords: []string{"_test_", "_live_", "_prod_"}, span: 120, lead: 2},
		{id: "gcp-api-key", re: regexp.MustCompile(`\b(AIza[\w-]{35})` + end), group: 1, keywords: []string{"aiza"}, span: 48},
		{id: "openai-api-key", re: regexp.MustCompile(`\b(sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{58,74}T3BlbkFJ[A-Za-z0-9_-]{58,74}|sk-[a-zA-Z0-9]{20}T3BlbkFJ[a-zA-Z0-9]{20})`), group: 1, keywords: []string{"t3blbkfj"}, span: 100, lead: 100},
		{id: "anthropic-api-key", re: regexp.MustCompile(`\b(sk-ant-(?:api|admin)\d\d-[a-zA-Z0-9_\-]{80,100})`), group: 1, keywords: []string{"sk-ant-"}, span: 120},
		{id: "npm-access-token", re: regexp.MustCompile(`(?i)\b(npm_[a-z0-9]{36})` + end), group: 1, keywords: []string{"npm_"}, span: 48},
		{id: "private-key", re: regexp.MustCompile(`(?i)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S]{64,}?-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----`), keywords: []string{"-----begin"}, span: 1 << 16},
		// A private key cut short (a preview, a truncated read) is still one.
		{id: "private-key", re: regexp.MustCompile(`(?i)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?:\\n|\s)*[A-Za-z0-9+/=]{16,}`), keywords: []string{"-----begin"}, span: 256},
		{id: "jwt", re: regexp.MustCompile(`\b(ey[a-zA-Z0-9]{17,}\.ey[a-zA-Z0-9/\\_-]{17,}\.(?:[a-zA-Z0-9/\\_-]{10,}={0,2})?)` + end), group: 1, keywords: []string{"eyj"}, span: 2048},
	}
})

// generic finds the value of an assignment to a name that says it holds
// a credential (password=..., "api_key": "...", SECRET_TOKEN: ...): the
// expression is matched right after each keyword.
var generic = sync.OnceValue(func() rule {
	return rule{
		id:       "generic-credential",
		re:       regexp.MustCompile(`^[\w.-]{0,20}(?:\\?["'])?[ \t]{0,3}(?:=|:=|:|=>)[ \t]{0,3}(?:\\?["'\x60])?([^\s"'\x60;,\\<>(){}\[\]]{8,200})`),
		group:    1,
		keep:     credentialValue,
		keywords: []string{"password", "passwd", "pwd", "secret", "token", "credential", "api_key", "api-key", "api.key", "apikey", "access_key", "access-key", "accesskey", "private_key", "private-key"},
		span:     260,
	}
})

// tokenChars are the characters of a random-looking token (base64 and
// base64url, and '=' of padding).
var tokenChars = setOf(alnum + "+/_=-")

// minToken is the shortest random-looking token reported.
const minToken = 32

// MaxFindings bounds what one scan reports, whatever its limit.
const MaxFindings = 4096

// Scan returns the credentials in text, in order, at most limit of them (0
// is MaxFindings). Where findings overlap, the rule of a known format wins
// over the generic ones, and each credential is reported once.
func Scan(text []byte, limit int) []Finding { return scan(text, limit, true) }

// minEncoded is the shortest base64 run decoded to be scanned itself: a
// credential with its name (password=12345678) encodes to about 24.
const minEncoded = 24

// scan is Scan; nested says whether base64 runs that decode to text are
// decoded and scanned too (once: what they decode to is not decoded
// again). A credential found inside one reports the whole run, by the
// rule "base64:" and the inner rule.
func scan(text []byte, limit int, nested bool) []Finding {
	if limit <= 0 || limit > MaxFindings {
		limit = MaxFindings
	}
	var kept []Finding // sorted by start, none overlapping
	// add keeps a finding that overlaps none kept; it says when the limit
	// is reached.
	add := func(rule string, start, stop int) bool {
		i, _ := slices.BinarySearchFunc(kept, start, func(f Finding, at int) int { return f.Start - at })
		if (i > 0 && kept[i-1].End > start) || (i < len(kept) && kept[i].Start < stop) {
			return false
		}
		kept = slices.Insert(kept, i, Finding{Rule: rule, Start: start, End: stop})
		return len(kept) == limit
	}
	s := string(text)
	lower := asciiLower(text)
	for _, r := range rules() {
		for _, w := range windows(lower, r.keywords, r.lead, r.span) {
			for _, m := range r.re.FindAllStringSubmatchIndex(s[w[0]:w[1]], -1) {
				start, stop := m[2*r.group], m[2*r.group+1]
				if start < 0 || (r.keep != nil && !r.keep(s[w[0]+start:w[0]+stop])) {
					continue
				}
				if add(r.id, w[0]+start, w[0]+stop) {
					return kept
				}
			}
		}
	}
	g := generic()
	for _, k := range g.keywords {
		for at := 0; ; {
			i := strings.Index(lower[at:], k)
			if i < 0 {
				break
			}
			at = i + at + len(k)
			w := s[at:min(len(s), at+g.span)]
			m := g.re.FindStringSubmatchIndex(w)
			if m == nil || !g.keep(w[m[2]:m[3]]) {
				continue
			}
			if add(g.id, at+m[2], at+m[3]) {
				return kept
			}
		}
	}
	// A known format re-encoded (see decoded), before what only looks
	// random.
	if nested && decoded(s, add) {
		return kept
	}
	// Random-looking tokens, last: a known format names a token better.
	for i := 0; i < len(s); {
		if !tokenChars[s[i]] {
			i++
			continue
		}
		j := i
		for j < len(s) && tokenChars[s[j]] {
			j++
		}
		if j-i >= minToken && randomToken(s[i:j]) && add("high-entropy-token", i, j) {
			return kept
		}
		if nested && j-i >= minEncoded {
			if b, ok := decodeText(s[i:j]); ok {
				if fs := scan(b, 1, false); len(fs) > 0 && add("base64:"+fs[0].Rule, i, j) {
					return kept
				}
			}
		}
		i = j
	}
	return kept
}

// asciiLower is text with ASCII letters in lower case, byte for byte (its
// offsets are the text's).
func asciiLower(text []byte) string {
	b := make([]byte, len(text))
	for i, c := range text {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return string(b)
}

// windows are the parts of text (lower case) to search for a rule: around
// each of its keywords, from lead and a byte before one to span bytes
// after it,
// merged where they meet; the whole text when there are no keywords.
func windows(lower string, keywords []string, lead, span int) [][2]int {
	if len(keywords) == 0 {
		return [][2]int{{0, len(lower)}}
	}
	var ws [][2]int
	for _, k := range keywords {
		for at := 0; ; {
			i := strings.Index(lower[at:], k)
			if i < 0 {
				break
			}
			i += at
			ws = append(ws, [2]int{max(0, i-lead-1), min(len(lower), i+span)})
			at = i + len(k)
		}
	}
	slices.SortFunc(ws, func(a, b [2]int) int { return a[0] - b[0] })
	var out [][2]int
	for _, w := range ws {
		if n := len(out); n > 0 && w[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], w[1])
			continue
		}
		out = append(out, w)
	}
	return out
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
	_, ok := decodeText(v)
	return ok
}

// decodeText decodes v as base64 (standard or URL alphabet, padded or
// not) and returns what it decodes to when that is readable text.
func decodeText(v string) ([]byte, bool) {
	v = strings.TrimRight(v, "=")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		// A token cut out of a longer one may not end on a boundary.
		for cut := 0; cut < 4 && cut < len(v); cut++ {
			b, err := enc.DecodeString(v[:len(v)-cut])
			if err != nil {
				continue
			}
			return b, len(b) > 0 && readable(b)
		}
	}
	return nil, false
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
