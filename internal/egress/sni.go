package egress

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// tlsHandshake is the content type of a TLS record carrying a ClientHello.
const tlsHandshake = 0x16

// Bounds of what cordon reads of a ClientHello before it decides.
const (
	// maxHello is the largest ClientHello message (its 4-byte header
	// included) that is inspected; a larger one cuts the connection.
	maxHello = 32 << 10
	// maxHelloRecords is the most records a ClientHello may span.
	maxHelloRecords = 64
	// maxRecord is the largest TLS plaintext record (RFC 8446, 5.1).
	maxRecord = 1 << 14
)

// looksLikeTLS reports whether b, the first bytes of a stream, start a TLS
// handshake record carrying a ClientHello: content type 22, a record version
// any TLS stack takes for a first record (below 0x1000: some accept more than
// 3.x), then handshake type 1. A stream that does is read by readClientHello,
// and cut if it cannot be inspected. It needs 6 bytes.
func looksLikeTLS(b []byte) bool {
	return len(b) >= 6 && b[0] == tlsHandshake && b[1] < 0x10 && b[5] == 1
}

// mayBeTLS reports whether b is a proper beginning of what looksLikeTLS
// accepts, so that more bytes are needed to tell.
func mayBeTLS(b []byte) bool {
	return len(b) < 6 && b[0] == tlsHandshake && (len(b) < 2 || b[1] < 0x10)
}

// readClientHello reads the ClientHello at the start of br, reassembled from
// as many consecutive handshake records as it spans, and returns the bytes
// read (which the caller forwards once it has checked the name) and the
// server name, "" if the hello has no server_name extension. err says why the
// hello cannot be inspected: it is too large, spans too many records, is
// interleaved with other records, or does not parse. Whatever err, the
// bytes read are bounded: maxHello, plus one record's overrun, plus the
// record headers.
func readClientHello(br *bufio.Reader) (held []byte, name string, err error) {
	var msg []byte // the handshake message so far
	for records := 0; ; records++ {
		if records == maxHelloRecords {
			return held, "", fmt.Errorf("the ClientHello spans more than %d TLS records", maxHelloRecords)
		}
		var hdr [5]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return held, "", fmt.Errorf("reading a TLS record header: %w", err)
		}
		held = append(held, hdr[:]...)
		if hdr[0] != tlsHandshake || hdr[1] >= 0x10 {
			return held, "", fmt.Errorf("a TLS record of type %d, version %#04x, before the ClientHello ended", hdr[0], binary.BigEndian.Uint16(hdr[1:3]))
		}
		n := int(binary.BigEndian.Uint16(hdr[3:5]))
		if n == 0 || n > maxRecord {
			return held, "", fmt.Errorf("a TLS handshake record of %d bytes (1 to %d)", n, maxRecord)
		}
		start := len(held)
		held = append(held, make([]byte, n)...)
		if _, err := io.ReadFull(br, held[start:]); err != nil {
			return held[:start], "", fmt.Errorf("reading a TLS record: %w", err)
		}
		msg = append(msg, held[start:]...)
		if len(msg) < 4 {
			continue
		}
		if msg[0] != 1 {
			return held, "", fmt.Errorf("the first TLS handshake message is of type %d, not a ClientHello", msg[0])
		}
		size := 4 + (int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3]))
		if size > maxHello {
			return held, "", fmt.Errorf("a ClientHello of %d bytes, more than the %d cordon inspects", size, maxHello)
		}
		if len(msg) >= size {
			name, err := parseClientHello(msg[:size])
			return held, name, err
		}
	}
}

// errHello is what a ClientHello that does not parse gives.
var errHello = errors.New("the ClientHello is malformed")

// parseClientHello returns the host_name of the server_name extension of a
// whole ClientHello handshake message, header included, or "" when it has no
// such extension. It is strict: lengths must add up, no extension may
// appear twice, and the server_name extension must hold exactly one
// non-empty host name, so that no server can read a name this parser did
// not see.
func parseClientHello(b []byte) (string, error) {
	// handshake: type(1)=1, length(3), version(2), random(32)
	if len(b) < 38 || b[0] != 1 || int(b[1])<<16|int(b[2])<<8|int(b[3]) != len(b)-4 {
		return "", errHello
	}
	b = b[38:]
	// vector returns the next vector of b with a lenBytes-long length, and
	// advances b past it.
	vector := func(lenBytes int) ([]byte, bool) {
		if len(b) < lenBytes {
			return nil, false
		}
		n := 0
		for _, c := range b[:lenBytes] {
			n = n<<8 | int(c)
		}
		if len(b) < lenBytes+n {
			return nil, false
		}
		v := b[lenBytes : lenBytes+n]
		b = b[lenBytes+n:]
		return v, true
	}
	// session id, cipher suites, compression methods
	for _, lenBytes := range []int{1, 2, 1} {
		if _, ok := vector(lenBytes); !ok {
			return "", errHello
		}
	}
	if len(b) == 0 {
		return "", nil // no extensions at all
	}
	exts, ok := vector(2)
	if !ok || len(b) != 0 {
		return "", errHello
	}
	seen := map[uint16]bool{}
	name := ""
	for len(exts) > 0 {
		if len(exts) < 4 {
			return "", errHello
		}
		typ := binary.BigEndian.Uint16(exts)
		n := int(binary.BigEndian.Uint16(exts[2:]))
		if len(exts) < 4+n {
			return "", errHello
		}
		data := exts[4 : 4+n]
		exts = exts[4+n:]
		if seen[typ] {
			return "", fmt.Errorf("%w: extension %d appears twice", errHello, typ)
		}
		seen[typ] = true
		if typ != 0 {
			continue
		}
		// server_name: a list of (type, name); one host_name (type 0).
		if len(data) < 2 || int(binary.BigEndian.Uint16(data)) != len(data)-2 {
			return "", errHello
		}
		list := data[2:]
		if len(list) == 0 {
			return "", fmt.Errorf("%w: an empty server_name list", errHello)
		}
		for len(list) > 0 {
			if len(list) < 3 {
				return "", errHello
			}
			l := int(binary.BigEndian.Uint16(list[1:]))
			if len(list) < 3+l {
				return "", errHello
			}
			if list[0] == 0 {
				if name != "" || l == 0 {
					return "", fmt.Errorf("%w: the server_name extension must hold one host name", errHello)
				}
				name = string(list[3 : 3+l])
			}
			list = list[3+l:]
		}
	}
	return name, nil
}
