package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// The host-side probes of the egress proxy: what a sandbox sends the proxy
// must not make cordon look names up, grow, or write to the operator's
// terminal what the sandbox chose.
var deputyNetProbes = []HostProbe{
	{"host-dns-denied", "host", "CONNECT to a name no rule allows, carrying data in the name (DNS exfiltration through the host's resolver)",
		"refused without any lookup: a resolver planted for cordon never sees the name", probeDNSDenied},
	{"host-header-flood", "host", "send the proxy one request header line of 64 MiB",
		"431 at 64 KiB; cordon allocates a few MiB, not the flood", probeHeaderFlood},
	{"host-escape-text", "host", "ask the proxy (SOCKS5) for a host name carrying terminal escape sequences and a forged cordon line",
		"cordon's stderr shows the name escaped, on one line", probeEscapeText},
}

// allowedName is the one destination the probes' profile allows.
const allowedName = "allowed.cordon-probe.invalid"

// egressProfile is base with the network allowing allowedName only.
func egressProfile(base *profile.Profile) (*profile.Profile, error) {
	p := base.Clone()
	p.SetLimit("wall", probeWall.String())
	p.Network = profile.Network{}
	if err := p.AddAllow(allowedName + ":443"); err != nil {
		return nil, err
	}
	return p, nil
}

// probeDNSDenied plants a resolver for cordon's proxy that answers nothing
// and records every name it is asked, then has the sandbox ask for a name
// no rule allows, and for the allowed one (which shows the resolver is the
// one cordon asks).
func probeDNSDenied(r Runner, base *profile.Profile) (Status, string) {
	p, err := egressProfile(base)
	if err != nil {
		return Error, err.Error()
	}
	secret := "secret-" + newMarker()[len("cordon-probe-"):] + ".exfil.invalid"
	var mu sync.Mutex
	var asked []string
	resolve := func(ctx context.Context, host string) ([]netip.Addr, error) {
		mu.Lock()
		asked = append(asked, host)
		mu.Unlock()
		return nil, errors.New("the planted resolver answers nothing")
	}
	out := &capture{max: 4096}
	o, err := r.Exec(Exec{Profile: p, Attack: []string{"connect", secret + ":443", allowedName + ":443"}, Stdout: out, Resolve: resolve})
	if err != nil {
		return Error, err.Error()
	}
	mu.Lock()
	defer mu.Unlock()
	for _, n := range asked {
		if strings.Contains(n, secret) {
			return Escaped, fmt.Sprintf("cordon looked up %s, which no rule allows (the attack said %q)", n, out.line())
		}
	}
	if len(asked) == 0 {
		return Error, fmt.Sprintf("the planted resolver was not asked even the allowed name (%s; the attack said %q)", o.Status, out.line())
	}
	return Contained, fmt.Sprintf("only %s was looked up; %s", strings.Join(asked, ", "), out.line())
}

// connectAttack asks the proxy for a tunnel to each destination and reports
// the answers.
func connectAttack(dests []string) int {
	var got []string
	for _, d := range dests {
		resp, c, _, err := connect(d)
		switch {
		case err != nil:
			got = append(got, d+": "+err.Error())
		case c != nil:
			c.Close()
			got = append(got, d+": tunnel opened")
		default:
			got = append(got, fmt.Sprintf("%s: %s", d, resp.Status))
		}
	}
	report("%s", strings.Join(got, "; "))
	return 0
}

// probeHeaderFlood measures what cordon allocates while the sandbox sends
// its proxy a request whose one header line never ends. The proxy runs in
// this process, so what it keeps is in this process's count.
func probeHeaderFlood(r Runner, base *profile.Profile) (Status, string) {
	p, err := egressProfile(base)
	if err != nil {
		return Error, err.Error()
	}
	const flood = 64 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	said, err := attackSaid(r, Exec{Profile: p, Attack: []string{"flood", fmt.Sprint(flood)}}, "sent ")
	if err != nil {
		return Error, err.Error()
	}
	runtime.ReadMemStats(&after)
	grew := int64(after.TotalAlloc - before.TotalAlloc)
	if grew > 32<<20 {
		return Escaped, fmt.Sprintf("cordon allocated %d MiB while the sandbox %s", grew>>20, said)
	}
	return Contained, fmt.Sprintf("cordon allocated %d MiB; the sandbox %s", grew>>20, said)
}

// floodAttack sends the proxy a request head whose one header line runs to
// n bytes, and reports how much went and what came back.
func floodAttack(n int64) int {
	c, err := dialProxy()
	if err != nil {
		report("no proxy: %v", err)
		return 0
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(c).ReadString('\n')
		answer <- strings.TrimSpace(line)
	}()
	fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nX-Flood: ", allowedName, allowedName)
	chunk := []byte(strings.Repeat("a", 1<<20))
	var sent int64
	for sent < n {
		w, err := c.Write(chunk)
		sent += int64(w)
		if err != nil {
			break
		}
	}
	c.(*net.TCPConn).CloseWrite()
	select {
	case a := <-answer:
		report("sent %d MiB of one header line; the proxy answered %q", sent>>20, a)
	case <-time.After(20 * time.Second):
		report("sent %d MiB of one header line; no answer", sent>>20)
	}
	return 0
}

// forgedName is what the escape-text attack asks for: an escape sequence
// that retitles the terminal, and a line that looks like cordon's.
const forgedName = "\x1b]0;cordon-probe\x07\x1b[2J\ncordon: the sandbox ended cleanly; forged by the sandbox"

// probeEscapeText reads cordon's stderr while the sandbox asks the proxy for
// forgedName.
func probeEscapeText(r Runner, base *profile.Profile) (Status, string) {
	p, err := egressProfile(base)
	if err != nil {
		return Error, err.Error()
	}
	out, errOut := &capture{max: 4096}, &capture{max: 64 << 10}
	o, err := r.Exec(Exec{Profile: p, Attack: []string{"socks-name"}, Stdout: out, Stderr: errOut})
	if err != nil {
		return Error, err.Error()
	}
	errOut.mu.Lock()
	text := errOut.buf.String()
	errOut.mu.Unlock()
	var denial string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "cordon: egress denied: ") {
			denial = line
		}
		if strings.HasPrefix(line, "cordon: the sandbox ended cleanly; forged") {
			return Escaped, "a line the sandbox chose reached cordon's stderr: " + fmt.Sprintf("%q", line)
		}
	}
	if strings.ContainsRune(text, 0x1b) {
		return Escaped, "an escape sequence the sandbox chose reached cordon's stderr"
	}
	if denial == "" {
		return Error, fmt.Sprintf("no denial on cordon's stderr to judge (%s; the attack said %q)", o.Status, out.line())
	}
	return Contained, fmt.Sprintf("%.200s", denial)
}

// socksNameAttack asks the proxy, in SOCKS5, for a connection to
// forgedName.
func socksNameAttack() int {
	c, err := dialProxy()
	if err != nil {
		report("no proxy: %v", err)
		return 0
	}
	defer c.Close()
	req := []byte{5, 1, 0}
	req = append(req, 5, 1, 0, 3, byte(len(forgedName)))
	req = append(req, forgedName...)
	req = append(req, 1, 187)
	c.Write(req)
	reply := make([]byte, 12)
	n, _ := io.ReadAtLeast(c, reply, 4)
	report("asked for the forged name; the proxy replied % x", reply[:n])
	return 0
}
