package probe

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// EgressBattery is the probes run through cordon's egress proxy, in a
// sandbox whose profile allows one destination: a service the host side
// planted (Targets.AllowedAddr). Each tries to make the proxy carry it
// somewhere else.
func EgressBattery() []Probe {
	return []Probe{
		{"net-proxy-loopback", "network", "CONNECT through the proxy to another service on the host's loopback",
			"denied with a reason", probeProxyTo(func(t *Targets) []string {
				return []string{t.LoopbackAddr, "[::1]:" + portOf(t.LoopbackAddr), "localhost:" + portOf(t.LoopbackAddr)}
			})},
		{"net-proxy-metadata", "network", "CONNECT through the proxy to the cloud metadata service (169.254.169.254, fd00:ec2::254)",
			"denied with a reason", probeProxyTo(func(*Targets) []string { return []string{"169.254.169.254:80", "[fd00:ec2::254]:80"} })},
		{"net-proxy-private", "network", "CONNECT through the proxy to private and mapped addresses (10/8, 192.168/16, ::ffff:10.0.0.1)",
			"denied with a reason", probeProxyTo(func(*Targets) []string { return []string{"10.0.0.1:80", "192.168.1.1:443", "[::ffff:10.0.0.1]:80"} })},
		{"net-proxy-plain-http", "network", "ask the proxy for http://169.254.169.254/ as a plain HTTP request",
			"denied with a reason", probeProxyGet},
		{"net-proxy-sni", "network", "open a tunnel to the allowed host and send a TLS ClientHello for another name",
			"the tunnel is cut before anything reaches the host", probeProxySNI},
	}
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// proxyAddr is where the sandbox's proxy listens, from the variables cordon
// sets inside.
func proxyAddr() (string, error) {
	v := os.Getenv("HTTP_PROXY")
	if v == "" {
		return "", fmt.Errorf("HTTP_PROXY is not set: the probe sandbox has no proxy")
	}
	u, err := url.Parse(v)
	if err != nil {
		return "", err
	}
	return u.Host, nil
}

// dialProxy connects to the sandbox's proxy, with a deadline for the whole
// exchange.
func dialProxy() (net.Conn, error) {
	pa, err := proxyAddr()
	if err != nil {
		return nil, err
	}
	c, err := net.DialTimeout("tcp", pa, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("the proxy: %w", err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, nil
}

// connect asks the proxy for a tunnel to dest, and returns the response
// and the connection (open only when the tunnel was granted).
func connect(dest string) (*http.Response, net.Conn, *bufio.Reader, error) {
	c, err := dialProxy()
	if err != nil {
		return nil, nil, nil, err
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		c.Close()
		return nil, nil, nil, fmt.Errorf("CONNECT %s: %w", dest, err)
	}
	if resp.StatusCode != http.StatusOK {
		c.Close()
		return resp, nil, nil, nil
	}
	return resp, c, br, nil
}

// denial judges a proxy's answer: a 403 with cordon's reason holds; a
// tunnel, or a 502 that says the proxy tried to dial, does not.
func denial(dest string, resp *http.Response) (bool, string) {
	reason := resp.Header.Get("X-Cordon-Denied")
	if resp.StatusCode == http.StatusForbidden && reason != "" {
		return true, reason
	}
	if resp.StatusCode == http.StatusBadGateway {
		return false, "the proxy tried to reach " + dest + " (502)"
	}
	return false, fmt.Sprintf("the proxy answered %s for %s", resp.Status, dest)
}

func probeProxyTo(dests func(*Targets) []string) func(*Targets) (Status, string) {
	return func(t *Targets) (Status, string) {
		var reasons []string
		for _, d := range dests(t) {
			resp, c, br, err := connect(d)
			if err != nil {
				return Error, err.Error()
			}
			if c != nil {
				line, _ := br.ReadString('\n')
				c.Close()
				return Escaped, fmt.Sprintf("the proxy opened a tunnel to %s; it said %q", d, strings.TrimSpace(line))
			}
			ok, why := denial(d, resp)
			if !ok {
				return Escaped, why
			}
			reasons = append(reasons, why)
		}
		return Contained, strings.Join(reasons, "; ")
	}
}

func probeProxyGet(*Targets) (Status, string) {
	c, err := dialProxy()
	if err != nil {
		return Error, err.Error()
	}
	defer c.Close()
	const dest = "169.254.169.254:80"
	fmt.Fprintf(c, "GET http://%s/latest/meta-data/ HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return Error, "GET through the proxy: " + err.Error()
	}
	if ok, why := denial(dest, resp); !ok {
		return Escaped, why
	}
	return Contained, resp.Header.Get("X-Cordon-Denied")
}

// clientHello returns the first flight of a TLS client asking for name.
func clientHello(name string) []byte {
	a, b := net.Pipe()
	go func() {
		tls.Client(a, &tls.Config{ServerName: name, InsecureSkipVerify: true}).Handshake()
		a.Close()
	}()
	buf := make([]byte, 4096)
	n, _ := b.Read(buf)
	b.Close()
	return buf[:n]
}

// probeProxySNI opens a tunnel the profile allows and, inside it, asks for
// another server by name: a proxy that checks only the CONNECT line would
// carry it to whatever that name's virtual host serves. It asks twice: with
// the ClientHello in one TLS record, and split over two, which a proxy
// that reads only the first record does not see whole.
func probeProxySNI(t *Targets) (Status, string) {
	if t.AllowedAddr == "" {
		return Error, "no allowed service planted"
	}
	hello := clientHello("evil.example")
	var seen []string
	for _, form := range []struct {
		name  string
		bytes []byte
	}{{"one record", hello}, {"split over two records", splitRecord(hello)}} {
		resp, c, br, err := connect(t.AllowedAddr)
		if err != nil {
			return Error, err.Error()
		}
		if c == nil {
			return Error, fmt.Sprintf("the proxy refused the allowed destination %s: %s", t.AllowedAddr, resp.Status)
		}
		c.Write(form.bytes)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, _ := br.ReadString('\n')
		c.Close()
		if bytes.Contains([]byte(got), []byte("cordon-canary")) {
			return Escaped, fmt.Sprintf("a ClientHello for evil.example (%s) reached %s, which answered", form.name, t.AllowedAddr)
		}
		seen = append(seen, form.name+": closed without an answer")
	}
	return Contained, strings.Join(seen, "; ")
}

// splitRecord rewrites the first TLS record of b as two records, each with
// half of its payload.
func splitRecord(b []byte) []byte {
	if len(b) < 6 {
		return b
	}
	n := int(b[3])<<8 | int(b[4])
	if 5+n > len(b) || n < 2 {
		return b
	}
	payload, rest := b[5:5+n], b[5+n:]
	half := n / 2
	var out []byte
	for _, part := range [][]byte{payload[:half], payload[half:]} {
		out = append(out, b[0], b[1], b[2], byte(len(part)>>8), byte(len(part)))
		out = append(out, part...)
	}
	return append(out, rest...)
}
