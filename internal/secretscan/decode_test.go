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
		{"joined", pat[:20] + "\n" + pat[20:]},
		{"joined", pat[:14] + " " + pat[14:27] + "\n\n" + pat[27:]},
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
		"build 42 of v1.2.3 took 17s on node-7 with go1.26 and x86_64 and sha256 abc123",
		"id: 3f2a9c1e-8b7d-4a5f-9e3d-2c1b0a9f8e7d\nid: 9e3d2c1b-0a9f-4e7d-8c5b-4a393f2a9c1e",
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

// A token printed in pieces across texts, with other texts between, is
// found when its last piece arrives; texts without one keep nothing open.
func TestPiecesAcrossTexts(t *testing.T) {
	var open []string
	feed := func(text string) []string {
		var rules []string
		rules, open = Pieces(open, []byte(text))
		return rules
	}
	for _, text := range []string{"total 12\ndrwxr-xr-x 2 user user 4096 Dec 7 notes", "hello world", "version 1.2.3"} {
		if r := feed(text); r != nil || len(open) != 0 {
			t.Fatalf("%q: %v, open %v", text, r, open)
		}
	}
	if r := feed("the first: " + pat[:14]); r != nil {
		t.Fatalf("the first piece alone: %v", r)
	}
	feed("something else, 42 lines")
	if r := feed(pat[14:27]); r != nil {
		t.Fatalf("the second piece: %v", r)
	}
	if r := feed(pat[27:] + " done"); len(r) != 1 || r[0] != "pieces:github-pat" {
		t.Fatalf("the last piece: %v (open %q)", r, open)
	}
	for i := 0; i < 100; i++ {
		feed(fmt.Sprintf("ghp_%d akia%d xoxb-%d", i, i, i))
	}
	if len(open) > maxOpen {
		t.Fatalf("%d pieces open", len(open))
	}
}
