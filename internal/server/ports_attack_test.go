package server

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// portBox is a fake sandbox whose loopback is a listener of the test: a
// "sandbox server" that answers whatever the test has it answer.
type portBox struct {
	*fakeBox
	addr string
}

func (b *portBox) Connect(ctx context.Context, port int) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", b.addr)
}

// hostileHTTP is the sandbox's HTTP server: it reads one request's
// head, keeps it, and writes answer raw.
type hostileHTTP struct {
	ln     net.Listener
	mu     sync.Mutex
	heads  []string
	answer string
}

func startHostileHTTP(t *testing.T, answer string) *hostileHTTP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hostileHTTP{ln: ln, answer: answer}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for i := 0; i < 100; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				var head strings.Builder
				for {
					line, err := br.ReadString('\n')
					head.WriteString(line)
					if err != nil || line == "\r\n" {
						break
					}
				}
				h.mu.Lock()
				h.heads = append(h.heads, head.String())
				h.mu.Unlock()
				io.WriteString(c, h.answer)
			}(c)
		}
	}()
	return h
}

// portFixture is a server over portBoxes that reach h, not wrapped in the
// conformance check (a 1xx would trip it), and a sandbox of agent a.
func portFixture(t *testing.T, h *hostileHTTP) (url, id, token string) {
	t.Helper()
	f, url, id := portURLFixture(t, h)
	return url, id, f.tokens["alice-a"]
}

// TestAttack_PortForward1xxSetCookie: the sandbox's server answers with a
// 103 Early Hints that carries Set-Cookie (and other headers) before its
// 200. httputil.ReverseProxy would copy a 1xx's headers straight to the
// client, past ModifyResponse: no informational answer but a WebSocket's
// 101 is passed on.
func TestAttack_PortForward1xxSetCookie(t *testing.T) {
	h := startHostileHTTP(t, "HTTP/1.1 103 Early Hints\r\nSet-Cookie: cordon-admin=planted; Path=/\r\nLink: </v1/sandboxes>; rel=preload\r\n\r\n"+
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok")
	url, id, token := portFixture(t, h)
	var mu sync.Mutex
	var early []textproto.MIMEHeader
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, hdr textproto.MIMEHeader) error {
			mu.Lock()
			early = append(early, hdr)
			mu.Unlock()
			return nil
		},
	})
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/sandboxes/"+id+"/ports/8000/x", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("Set-Cookie in the final answer: %v", resp.Header)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, hdr := range early {
		if v := hdr.Get("Set-Cookie"); v != "" {
			t.Errorf("a 1xx answer of the sandbox reached the client with Set-Cookie %q (headers %v)", v, hdr)
		}
	}
}

// TestAttack_PortForwardTrailerSetCookie: the sandbox's server declares
// Set-Cookie as a trailer and sends it after a chunked body: no trailer
// of the sandbox's is passed on.
func TestAttack_PortForwardTrailerSetCookie(t *testing.T) {
	h := startHostileHTTP(t, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nTrailer: Set-Cookie\r\n\r\n"+
		"2\r\nok\r\n0\r\nSet-Cookie: cordon-admin=planted; Path=/\r\n\r\n")
	url, id, token := portFixture(t, h)
	req, _ := http.NewRequest("GET", url+"/v1/sandboxes/"+id+"/ports/8000/x", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if v := resp.Trailer.Get("Set-Cookie"); v != "" || resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("Set-Cookie from the sandbox reached the client as a trailer: %q (trailers %v)", v, resp.Trailer)
	}
}

// TestAttack_PortForwardDisclosesClientAddress: the forwarded request
// carries no X-Forwarded-For (the address of whoever called: an admin's
// workstation) nor X-Forwarded-Host (the server's name) to the sandbox.
func TestAttack_PortForwardDisclosesClientAddress(t *testing.T) {
	h := startHostileHTTP(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	url, id, token := portFixture(t, h)
	req, _ := http.NewRequest("GET", url+"/v1/sandboxes/"+id+"/ports/8000/x", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.heads) == 0 {
		t.Fatal("the sandbox's server saw no request")
	}
	head := strings.ToLower(h.heads[0])
	for _, leak := range []string{"x-forwarded-for:", "x-forwarded-host:", "forwarded:"} {
		if strings.Contains(head, "\n"+leak) {
			t.Errorf("the sandbox learns the caller's address or the server's name (%s):\n%s", leak, h.heads[0])
		}
	}
}

// rawHeader is one 512-byte ustar header block with the given type, name
// and size, its checksum computed.
func rawHeader(typ byte, name string, size int) []byte {
	b := make([]byte, 512)
	copy(b[0:], name)
	copy(b[100:], "0000644\x00")
	copy(b[108:], "0000000\x00")
	copy(b[116:], "0000000\x00")
	copy(b[124:], fmt.Sprintf("%011o\x00", size))
	copy(b[136:], fmt.Sprintf("%011o\x00", 0))
	b[156] = typ
	copy(b[257:], "ustar\x0000")
	for i := 148; i < 156; i++ {
		b[i] = ' '
	}
	sum := 0
	for _, c := range b {
		sum += int(c)
	}
	copy(b[148:], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

func pad512(b []byte) []byte {
	if r := len(b) % 512; r != 0 {
		b = append(b, make([]byte, 512-r)...)
	}
	return b
}

// paxRecord is one "LEN key=value\n" record.
func paxRecord(k, v string) string {
	s := " " + k + "=" + v + "\n"
	n := len(s) + 1
	for len(fmt.Sprint(n))+len(s) != n {
		n = len(fmt.Sprint(n)) + len(s)
	}
	return fmt.Sprint(n) + s
}

// TestAttack_TarInSparseExpansion: an archive of a few KiB whose one entry
// is a PAX (GNU 0.1) sparse file would extract as a file of the sparse
// header's declared size: an approver shown a 2 KiB archive would approve
// any amount of disk. Sparse entries are refused, and the files written
// are bounded by tarMaxBytes as the stream is. Here tarMaxBytes is
// lowered to 64 KiB and the sparse file declares 8 MiB.
func TestAttack_TarInSparseExpansion(t *testing.T) {
	old := tarMaxBytes
	tarMaxBytes = 64 << 10
	defer func() { tarMaxBytes = old }()
	const real = 8 << 20
	recs := paxRecord("GNU.sparse.numblocks", "1") + paxRecord("GNU.sparse.map", "0,1") + paxRecord("GNU.sparse.size", fmt.Sprint(real))
	var arc []byte
	arc = append(arc, rawHeader('x', "PaxHeaders/bomb", len(recs))...)
	arc = append(arc, pad512([]byte(recs))...)
	arc = append(arc, rawHeader('0', "bomb", 1)...)
	arc = append(arc, pad512([]byte("A"))...)
	arc = append(arc, make([]byte, 1024)...)
	// The archive reads back as the test means it to.
	tr := tar.NewReader(bytes.NewReader(arc))
	hdr, err := tr.Next()
	if err != nil || hdr.Size != real {
		t.Fatalf("the crafted archive: %+v %v", hdr, err)
	}
	dir := t.TempDir()
	sum, err := tarIn(dir, bytes.NewReader(arc))
	st, serr := os.Stat(filepath.Join(dir, "bomb"))
	if serr == nil && st.Size() > tarMaxBytes {
		t.Errorf("a %d-byte archive extracted as a %d-byte file (tarMaxBytes %d): summary %+v, err %v", len(arc), st.Size(), tarMaxBytes, sum, err)
	}
	if err == nil {
		if _, perr := parseSummary(fmt.Sprintf(`{"entries":%d,"bytes":%d}`, sum.Entries, sum.Bytes)); perr != nil {
			t.Errorf("tar-in succeeded, yet the host refuses its honest summary: %v", perr)
		}
	}
}

// slowReader hands out at most 512 bytes a read, after a pause: an
// upload as slow as a sandbox's other processes need it to be.
type slowReader struct{ r io.Reader }

func (s slowReader) Read(p []byte) (int, error) {
	time.Sleep(10 * time.Millisecond)
	return s.r.Read(p[:min(len(p), 512)])
}

// TestAttack_TarInChmodFollowsSwappedSymlink: tar-in promises that no
// symlink, in the archive or already there, is ever followed: the mode of
// a file written is set through its descriptor, so another process of the
// sandbox that swaps the file for a symlink (an atomic rename) does not
// get the archive's mode (here 0777) applied to whatever the link names,
// outside the directory.
func TestAttack_TarInChmodFollowsSwappedSymlink(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	const n = 10
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := 0; i < n; i++ {
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("f%d", i), Mode: 0o777, Size: 2048, Typeflag: tar.TypeReg})
		tw.Write(bytes.Repeat([]byte("x"), 2048))
	}
	tw.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; i < n && time.Now().Before(deadline); i++ {
			name := filepath.Join(dir, fmt.Sprintf("f%d", i))
			for time.Now().Before(deadline) {
				if _, err := os.Lstat(name); err == nil {
					break
				}
				time.Sleep(100 * time.Microsecond)
			}
			tmp := filepath.Join(dir, fmt.Sprintf(".l%d", i))
			os.Symlink(victim, tmp)
			os.Rename(tmp, name)
		}
	}()
	_, err := tarIn(dir, slowReader{bytes.NewReader(buf.Bytes())})
	<-done
	st, serr := os.Stat(victim)
	if serr != nil {
		t.Fatal(serr)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("tar-in changed the mode of a file outside its directory through a symlink swapped in: %v (tarIn: %v)", st.Mode().Perm(), err)
	}
}
