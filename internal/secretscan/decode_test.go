package secretscan

import (
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

const pat = "ghp_R7uXbq2mWk9LpZt4Vn6Hs8Dc1Jy3Fa5Ge0Qo"

// A token re-encoded as an agent or a shell would, to pass a scanner, is
// found: as the whole encoded run, by the form and the inner rule.
func TestScanDecodesWhatShellsMake(t *testing.T) {
	var escU, escX strings.Builder
	for _, c := range pat {
		fmt.Fprintf(&escU, `\u%04x`, c)
		fmt.Fprintf(&escX, `\x%02x`, c)
	}
	spaced := strings.Join(strings.Split(pat, ""), " ")
	dashed := strings.Join(strings.Split(pat, ""), "-")
	for _, tc := range []struct{ form, enc string }{
		{"hex", hex.EncodeToString([]byte(pat))},
		{"hex", strings.ToUpper(hex.EncodeToString([]byte("token=" + pat)))},
		{"percent", "%22token%22%3A%20%22" + strings.ReplaceAll(pat, "_", "%5F") + "%22"},
		{"percent", func() string {
			var b strings.Builder
			for _, c := range []byte(pat) {
				fmt.Fprintf(&b, "%%%02X", c)
			}
			return b.String()
		}()},
		{"base32", base32.StdEncoding.EncodeToString([]byte(pat))},
		{"base32", strings.ToLower(strings.TrimRight(base32.StdEncoding.EncodeToString([]byte(pat)), "="))},
		{"escapes", escU.String()},
		{"escapes", escX.String()},
		{"spaced", spaced},
		{"spaced", dashed},
	} {
		text := "out: " + tc.enc + "\nmore"
		fs := Scan([]byte(text), 0)
		if len(fs) != 1 || fs[0].Rule != tc.form+":github-pat" || text[fs[0].Start:fs[0].End] != tc.enc {
			t.Errorf("%s %q: %+v", tc.form, tc.enc, fs)
		}
	}
}

// Ordinary text in those forms is not a credential: a git hash, a
// SHA-256, a URL with a query, base32 of prose, escaped prose, spaced
// words.
func TestScanDecodedOrdinaryText(t *testing.T) {
	for _, text := range []string{
		"commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 and sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		hex.EncodeToString([]byte("the quick brown fox jumps over the lazy dog")),
		"https://example.org/search?q=" + url.QueryEscape("what is a sandbox, and why?") + "&lang=en",
		base32.StdEncoding.EncodeToString([]byte("the quick brown fox jumps over the lazy dog")),
		`"caf\u00e9 na\u00efve r\u00e9sum\u00e9 d\u00e9j\u00e0 vu"`,
		"H e l l o   w o r l d , t h i s i s f i n e",
		"a-b-c-d-e-f-g-h-i-j-k-l-m-n-o-p-q-r",
	} {
		if fs := Scan([]byte(text), 0); len(fs) != 0 {
			t.Errorf("%q: %+v", text, fs)
		}
	}
}

// BenchmarkScan measures the scanner's throughput on a tool's output of
// ordinary text and code with the encoded forms in it, and no credential.
func BenchmarkScan(b *testing.B) {
	var sb strings.Builder
	for sb.Len() < 1<<20 {
		sb.WriteString("func main() { fmt.Println(\"hello, world\") } // 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39\n")
		sb.WriteString("GET /search?q=" + url.QueryEscape("a sandbox & its view") + " HTTP/1.1 caf\\u00e9 a-b-c-d\n")
		sb.WriteString(base32.StdEncoding.EncodeToString([]byte("the quick brown fox")) + " " + hex.EncodeToString([]byte("jumps over")) + "\n")
	}
	text := []byte(sb.String())
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if fs := Scan(text, 0); len(fs) != 0 {
			b.Fatalf("%+v", fs[0])
		}
	}
}
