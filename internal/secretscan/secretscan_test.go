package secretscan

import (
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// token is n characters from alphabet, the same for a seed: a secret that
// looks like one, made here so that the test file holds none.
func token(seed uint64, alphabet string, n int) string {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

const (
	base62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	upper2 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
)

func TestScanFindsCredentials(t *testing.T) {
	pem := "-----BEGIN " + "RSA PRIVATE KEY-----\n" + token(9, base62, 64) + "\n" + token(10, base62, 64) + "\n-----END RSA PRIVATE KEY-----\n"
	jwtHead := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	jwtBody := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"1234567890","name":"Ann"}`))
	for _, c := range []struct{ rule, text string }{
		{"aws-access-token", "AWS_ACCESS_KEY_ID=AKIA" + token(1, upper2, 16) + "\n"},
		{"github-pat", "token: ghp_" + token(2, base62, 36)},
		{"github-pat", "ghp_" + token(2, base62, 36)}, // at the very start
		{"aws-access-token", "AKIA" + token(1, upper2, 16)},
		{"stripe-access-token", "rk_test_" + token(7, base62, 30)},
		{"github-pat", `{"auth":"gho_` + token(3, base62, 36) + `"}`},
		{"github-fine-grained-pat", "github_pat_" + token(4, base62, 82)},
		{"gitlab-token", "glpat-" + token(5, base62, 20)},
		{"slack-token", "xoxb-1234567890-1234567890123-" + token(6, base62, 24)},
		{"stripe-access-token", "sk_live_" + token(7, base62, 24) + "\n"},
		{"gcp-api-key", `key="AIza` + token(8, base62, 35) + `"`},
		{"private-key", pem},
		{"private-key", strings.ReplaceAll(pem[:120], "\n", `\n`)}, // JSON-escaped, cut short
		{"jwt", "Authorization: Bearer " + jwtHead + "." + jwtBody + "." + token(11, base62, 43) + "\n"},
		{"generic-credential", "DB_PASSWORD=s3cr3t-Hunter2!\n"},
		{"generic-credential", `{"api_key": "` + "k-" + token(12, "abcdef0123456789", 24) + `"}`},
		{"generic-credential", `password: "correct-horse-9-battery"`},
		{"high-entropy-token", "value " + token(13, base62, 40) + " end"},
	} {
		fs := Scan([]byte(c.text), 0)
		if len(fs) == 0 {
			t.Errorf("%s: not found in %q", c.rule, c.text)
			continue
		}
		if fs[0].Rule != c.rule {
			t.Errorf("%q: found %s, want %s", c.text, fs[0].Rule, c.rule)
		}
		if fs[0].End <= fs[0].Start || fs[0].End > len(c.text) {
			t.Errorf("%q: bad span %d-%d", c.text, fs[0].Start, fs[0].End)
		}
	}
}

// A .env file as an agent reads it: each line's value is found.
func TestScanDotEnv(t *testing.T) {
	env := "# settings\nDEBUG=true\nPORT=8080\nSTRIPE_KEY=sk_live_" + token(20, base62, 24) +
		"\nDATABASE_PASSWORD=pa55-" + token(21, base62, 12) + "\nGITHUB_TOKEN=ghp_" + token(22, base62, 36) + "\n"
	b, _ := json.Marshal(map[string]string{"content": env})
	fs := Scan(b, 0)
	if len(fs) != 3 {
		t.Fatalf("found %v in %s, want the three credentials", fs, b)
	}
	for _, f := range fs {
		got := string(b[f.Start:f.End])
		if strings.Contains(got, "8080") || strings.Contains(got, "true") {
			t.Errorf("finding %s covers %q, not a credential", f.Rule, got)
		}
	}
}

func TestScanIgnoresOrdinaryText(t *testing.T) {
	long := base64.StdEncoding.EncodeToString([]byte("The quick brown fox jumps over the lazy dog, again and again, until the dog wakes up."))
	for _, text := range []string{
		"package main\n\nfunc main() {\n\tpassword := os.Getenv(\"PASSWORD\")\n\tfmt.Println(len(password))\n}\n",
		`if cfg.Password == "" { return errors.New("password: required") }`,
		`token = self.tokenizer.next_token()`,
		`api_key: ${API_KEY}`,
		`password = "changeme"`,
		"id 123e4567-e89b-12d3-a456-426614174000",
		"commit 4da34b7e0c2f1b9a8d7e6f5a4b3c2d1e0f9a8b7c",
		"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		long,
		"data:text/plain;base64," + long,
		"/usr/lib/x86_64-linux-gnu/libstdc++.so.6 /home/agent/workspace/internal/gateway/gateway_test.go",
		"TestGatewayRefusesOversizedArgumentsOverStdioAndHTTP",
		"https://pkg.go.dev/github.com/modelcontextprotocol/go-sdk/mcp#StreamableHTTPOptions",
		"The AKIA prefix alone is not a key, nor is ghp_ or sk_live_ without a body.",
	} {
		if fs := Scan([]byte(text), 0); len(fs) > 0 {
			t.Errorf("%q: found %s at %q, which is not a credential", text, fs[0].Rule, text[fs[0].Start:fs[0].End])
		}
	}
}

func TestScanLimitAndOverlap(t *testing.T) {
	text := strings.Repeat("x ghp_"+token(30, base62, 36)+" y\n", 5)
	if n := len(Scan([]byte(text), 0)); n != 5 {
		t.Errorf("found %d, want 5 (one per token, overlapping rules once)", n)
	}
	if n := len(Scan([]byte(text), 2)); n != 2 {
		t.Errorf("with a limit of 2, found %d", n)
	}
	if rule, ok := Found([]byte(text)); !ok || rule != "github-pat" {
		t.Errorf("Found = %q, %v", rule, ok)
	}
	if _, ok := Found([]byte("nothing here")); ok {
		t.Error("Found a credential in plain words")
	}
}

// A credential in base64 inside text (a config blob, a data: URL) is found,
// as the whole encoded run; base64 of ordinary text is not a credential.
func TestScanDecodesBase64(t *testing.T) {
	enc := base64.StdEncoding.EncodeToString([]byte("token=ghp_" + "R7uXbq2mWk9LpZt4Vn6Hs8Dc1Jy3Fa5Ge0Qo"))
	text := "config: " + enc + " end"
	fs := Scan([]byte(text), 0)
	if len(fs) != 1 || !strings.HasPrefix(fs[0].Rule, "base64:") || text[fs[0].Start:fs[0].End] != enc {
		t.Errorf("base64 of a token: %+v", fs)
	}
	plain := base64.StdEncoding.EncodeToString([]byte("the quick brown fox jumps over the lazy dog"))
	if fs := Scan([]byte(plain), 0); len(fs) != 0 {
		t.Errorf("base64 of plain text: %+v", fs)
	}
}
