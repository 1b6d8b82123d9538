package egress

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

var (
	// errSwitched: the request just sent switches protocols; what follows
	// it is not HTTP/1 requests.
	errSwitched = errors.New("the request switches protocols")
	// errNotHTTP: the stream's first line is not a request line.
	errNotHTTP = errors.New("not an HTTP request")
)

// maxChunkLine bounds the size line of a chunk of a chunked body, its
// extensions included.
const maxChunkLine = 4 << 10

// sendHTTP carries a plain HTTP tunnel's requests one by one: each request's
// head is read (at most maxHead bytes), its host (the Host header, and the
// target's authority when it has one) must be the tunnel's, and then it and
// its body (by Content-Length, or chunked) are sent as they came. A request
// that servers could read in more than one way, or that net/http does not
// read, cuts the tunnel, so that no server sees a request, or a request
// boundary, this check did not. It returns nil when the client ends between
// requests, errNotHTTP when the stream's first line is not a request line
// (what was read has been sent), and errSwitched after a request that
// switches protocols (Upgrade, CONNECT): whether the server switches or
// not, what the client sends next is looked at afresh by send.
func (t *tunnel) sendHTTP(br *bufio.Reader) error {
	hb := getHead()
	head := *hb
	defer func() { putHead(hb, head) }()
	parse := getReader(nil)
	defer putReader(parse)
	for first := true; ; first = false {
		var line int
		var err error
		head, line, err = readHead(br, head[:0])
		if errors.Is(err, errHeadTooLarge) {
			return t.refuse("an HTTP request head of more than %d bytes cannot be inspected; the tunnel is cut", maxHead)
		}
		if err != nil {
			// The client ended, between requests or inside one. An
			// unfinished request is not sent; the unfinished first
			// line of a stream, which no server takes for a request,
			// is.
			if line < 0 && first && len(head) > 0 {
				if _, werr := t.write(t.up, head, true); werr != nil {
					return werr
				}
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil
			}
			return err
		}
		if line < 0 {
			if !first {
				return t.refuse("what follows an HTTP request in the tunnel is not an HTTP request; the tunnel is cut")
			}
			if _, err := t.write(t.up, head, true); err != nil {
				return err
			}
			return errNotHTTP
		}
		if why := malformed(head[line:]); why != "" {
			return t.refuse("an HTTP request cannot be inspected (%s); the tunnel is cut", why)
		}
		parse.Reset(bytes.NewReader(head[line:]))
		req, err := http.ReadRequest(parse)
		if err != nil {
			// The error may quote what the client sent.
			return t.refuse("an HTTP request cannot be inspected (%s); the tunnel is cut", safeName(err.Error()))
		}
		if req.ProtoMajor != 1 {
			return t.refuse("%s cannot be inspected; the tunnel is cut", req.Proto)
		}
		if h := hostOnly(req.URL.Host); h != "" && !sameHost(h, t.host) {
			return t.refuse(`the HTTP request target's host "%s" differs from the tunnel's host`, safeName(h))
		}
		for _, v := range headerValues(head[line:], "Host") {
			if h := hostOnly(v); h != "" && !sameHost(h, t.host) {
				return t.refuse(`the HTTP Host "%s" differs from the tunnel's host`, safeName(h))
			}
		}
		chunked := len(req.TransferEncoding) > 0
		if chunked && len(headerValues(head[line:], "Content-Length")) > 0 {
			return t.refuse("an HTTP request with both Transfer-Encoding and Content-Length cannot be inspected; the tunnel is cut")
		}
		if _, err := t.write(t.up, head, true); err != nil {
			return err
		}
		if chunked {
			err = t.sendChunked(br)
		} else if req.ContentLength > 0 {
			err = t.sendN(br, req.ContentLength)
		}
		if err != nil {
			return err
		}
		if req.Method == http.MethodConnect || req.Header.Get("Upgrade") != "" {
			return errSwitched
		}
	}
}

// readHead reads the next request head from br into buf: the empty lines
// before it, the request line, and the header lines up to and including the
// empty line that ends them, at most maxHead bytes in all. Lines end with
// LF, as lenient servers read them. line is where the request line starts
// in head, -1 when no request line was read: the first line that is not
// empty is not one (head then ends with it), or the stream ended or grew too
// large before one was whole.
func readHead(br *bufio.Reader, buf []byte) (head []byte, line int, err error) {
	head = buf
	for {
		start := len(head)
		if head, err = readLine(br, head, maxHead); err != nil {
			return head, -1, err
		}
		l := head[start:]
		if len(bytes.TrimRight(l, " \t\r\n")) == 0 {
			continue // an empty line before the request, which servers skip
		}
		if !requestLine(l) {
			return head, -1, nil
		}
		line = start
		break
	}
	for {
		start := len(head)
		if head, err = readLine(br, head, maxHead); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return head, line, err
		}
		if l := head[start:]; len(l) <= 2 && len(bytes.TrimRight(l, "\r\n")) == 0 {
			return head, line, nil
		}
	}
}

// readLine appends br's next line, up to and including its LF, to buf,
// which may not grow past limit (errHeadTooLarge). At the end of the stream
// it returns what there was, and io.EOF.
func readLine(br *bufio.Reader, buf []byte, limit int) ([]byte, error) {
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) > limit {
			return buf, errHeadTooLarge
		}
		buf = append(buf, frag...)
		if err != bufio.ErrBufferFull {
			return buf, err
		}
	}
}

// requestLine reports whether l may be meant as an HTTP request line, as
// lenient servers read one: words separated by blanks, the last of which
// starts with "HTTP/". Whether it is a valid one, http.ReadRequest says.
func requestLine(l []byte) bool {
	words := bytes.FieldsFunc(l, func(r rune) bool { return r == ' ' || r == '\t' || r == '\r' || r == '\n' })
	return len(words) >= 2 && len(words[len(words)-1]) >= 5 && strings.EqualFold(string(words[len(words)-1][:5]), "HTTP/")
}

// malformed says what in a request head servers may read in more than one
// way, which the check does not take: a CR that does not end a line, and a
// header line folded onto the next (obs-fold).
func malformed(head []byte) string {
	for i, c := range head {
		if c == '\r' && (i+1 == len(head) || head[i+1] != '\n') {
			return "a CR inside a line"
		}
		if c == '\n' && i+1 < len(head) && (head[i+1] == ' ' || head[i+1] == '\t') {
			return "a folded header line"
		}
	}
	return ""
}

// headerValues returns the values of the header lines of a request head
// named name, as they were written (http.ReadRequest takes Host out of the
// header, and Content-Length when the body is chunked).
func headerValues(head []byte, name string) []string {
	var vs []string
	lines := bytes.Split(head, []byte("\n"))
	for _, l := range lines[1:] {
		if k, v, ok := bytes.Cut(l, []byte(":")); ok && strings.EqualFold(string(k), name) {
			vs = append(vs, string(bytes.TrimSpace(v)))
		}
	}
	return vs
}

// hostOnly returns the host of a Host header or authority, without port
// or brackets.
func hostOnly(h string) string {
	h = strings.TrimSpace(h)
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	return strings.Trim(h, "[]")
}

// sendN sends the next n bytes of br up the tunnel.
func (t *tunnel) sendN(br *bufio.Reader, n int64) error {
	buf := getCopyBuf()
	defer putCopyBuf(buf)
	sent, err := io.CopyBuffer(writerFunc(func(b []byte) (int, error) { return t.write(t.up, b, true) }), io.LimitReader(br, n), *buf)
	if err == nil && sent < n {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// sendChunked sends a chunked body up the tunnel, as it came: each chunk's
// size line and data, then the trailer lines up to the empty line that ends
// the body. A line that is not as RFC 9112 (7.1) writes it cuts the tunnel.
func (t *tunnel) sendChunked(br *bufio.Reader) error {
	var line []byte
	for {
		var err error
		if line, err = readLine(br, line[:0], maxChunkLine); err != nil {
			if errors.Is(err, errHeadTooLarge) {
				return t.refuse("a chunk size line of more than %d bytes; the tunnel is cut", maxChunkLine)
			}
			return err
		}
		size, ok := chunkSize(line)
		if !ok {
			return t.refuse("a malformed chunk size line in an HTTP request body; the tunnel is cut")
		}
		if _, err := t.write(t.up, line, true); err != nil {
			return err
		}
		if size == 0 {
			break
		}
		if err := t.sendN(br, size); err != nil {
			return err
		}
		if line, err = readLine(br, line[:0], maxChunkLine); err != nil {
			return err
		}
		if s := string(line); s != "\r\n" && s != "\n" {
			return t.refuse("a chunk of an HTTP request body is longer than its size; the tunnel is cut")
		}
		if _, err := t.write(t.up, line, true); err != nil {
			return err
		}
	}
	// Trailer lines, then the empty line.
	var trailers []byte
	for {
		start := len(trailers)
		var err error
		if trailers, err = readLine(br, trailers, maxHead); err != nil {
			if errors.Is(err, errHeadTooLarge) {
				return t.refuse("HTTP trailers of more than %d bytes; the tunnel is cut", maxHead)
			}
			return err
		}
		if why := malformed(trailers[start:]); why != "" {
			return t.refuse("an HTTP request's trailers cannot be inspected (%s); the tunnel is cut", why)
		}
		if len(bytes.TrimRight(trailers[start:], "\r\n")) == 0 {
			_, err := t.write(t.up, trailers, true)
			return err
		}
	}
}

// chunkSize reads a chunk size line: hexadecimal digits, then, optionally,
// blanks and extensions after ";", then the line's end.
func chunkSize(line []byte) (int64, bool) {
	l := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
	if bytes.IndexByte(l, '\r') >= 0 {
		return 0, false
	}
	digits := 0
	for digits < len(l) && strings.IndexByte("0123456789abcdefABCDEF", l[digits]) >= 0 {
		digits++
	}
	if digits == 0 || digits > 15 {
		return 0, false
	}
	rest := bytes.TrimLeft(l[digits:], " \t")
	if len(rest) > 0 && rest[0] != ';' {
		return 0, false
	}
	n, err := strconv.ParseInt(string(l[:digits]), 16, 64)
	return n, err == nil
}
