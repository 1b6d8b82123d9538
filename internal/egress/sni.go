package egress

import (
	"bufio"
	"encoding/binary"
)

// maxHello is the most of a ClientHello record cordon reads to find the
// server name.
const maxHello = 16 << 10

// peekSNI looks at, without consuming, the first TLS record the client sends
// and returns the server name of its ClientHello. ok is false when the
// stream does not start with a TLS handshake.
func peekSNI(br *bufio.Reader) (name string, ok bool) {
	hdr, err := br.Peek(5)
	if err != nil || hdr[0] != 0x16 || hdr[1] != 3 {
		return "", false
	}
	n := int(binary.BigEndian.Uint16(hdr[3:5]))
	if n > maxHello || n > br.Size()-5 {
		return "", true // a TLS record too large to inspect: no name seen
	}
	rec, err := br.Peek(5 + n)
	if err != nil {
		return "", true
	}
	return parseClientHello(rec[5:]), true
}

// parseClientHello returns the host_name of the server_name extension of a
// ClientHello handshake message, or "".
func parseClientHello(b []byte) string {
	// handshake: type(1)=1, length(3), version(2), random(32)
	if len(b) < 38 || b[0] != 1 {
		return ""
	}
	b = b[38:]
	skip := func(lenBytes int) bool {
		if len(b) < lenBytes {
			return false
		}
		n := 0
		for _, c := range b[:lenBytes] {
			n = n<<8 | int(c)
		}
		if len(b) < lenBytes+n {
			return false
		}
		b = b[lenBytes+n:]
		return true
	}
	// session id, cipher suites, compression methods
	if !skip(1) || !skip(2) || !skip(1) {
		return ""
	}
	if len(b) < 2 {
		return ""
	}
	exts := b[2:]
	if n := int(binary.BigEndian.Uint16(b)); n < len(exts) {
		exts = exts[:n]
	}
	for len(exts) >= 4 {
		typ := binary.BigEndian.Uint16(exts)
		n := int(binary.BigEndian.Uint16(exts[2:]))
		if len(exts) < 4+n {
			return ""
		}
		data := exts[4 : 4+n]
		exts = exts[4+n:]
		if typ != 0 || len(data) < 2 {
			continue
		}
		list := data[2:]
		for len(list) >= 3 {
			nameType := list[0]
			l := int(binary.BigEndian.Uint16(list[1:]))
			if len(list) < 3+l {
				return ""
			}
			if nameType == 0 {
				return string(list[3 : 3+l])
			}
			list = list[3+l:]
		}
	}
	return ""
}
