package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// onNode creates a sandbox of alice through node n, where it stays (the
// receiving node wins a tie of room).
func (c *cluster) onNode(t *testing.T, n *clusterNode, node string) string {
	t.Helper()
	sb, err := c.client(n, "alice-a").Create(context.Background(), "")
	if err != nil || sb.Node != node {
		t.Fatalf("a create through %s: %+v %v", node, sb, err)
	}
	return sb.ID
}

// A request forwarded to a port of a sandbox on another node reaches the
// sandbox's server without the nodes' signature: the code in the sandbox
// learns neither the client's address nor the node's name, and holds no
// signature it could replay to pass as a forwarded request (past the
// token's rate, recorded as another node's).
func TestClusterPortForwardHidesSignature(t *testing.T) {
	hostile := startHostileHTTP(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
	c := newCluster(t)
	c.box = func(node, id string) Sandbox {
		return &portBox{fakeBox: &fakeBox{id: node + ":" + id, done: make(chan struct{})}, addr: hostile.ln.Addr().String()}
	}
	n1, n2 := c.start(t, "n1", nil), c.start(t, "n2", nil)
	id := c.onNode(t, n2, "n2")
	resp, err := c.client(n1, "alice-a").Port(context.Background(), id, 8080, "POST", "/hook", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Cordon-Node") != "n2" {
		t.Fatalf("a port request forwarded to n2: %d %v", resp.StatusCode, resp.Header)
	}
	hostile.mu.Lock()
	heads := strings.Join(hostile.heads, "")
	hostile.mu.Unlock()
	if !strings.Contains(heads, "POST /hook") {
		t.Fatalf("the sandbox's server did not get the request: %q", heads)
	}
	if strings.Contains(strings.ToLower(heads), "cordon-forwarded") {
		// What the sandbox can do with it: send the same request to n2
		// itself, as if n1 forwarded it.
		req, _ := http.NewRequest("POST", n2.url+"/v1/sandboxes/"+id+"/ports/8080/hook", strings.NewReader("anything"))
		req.Header.Set("Authorization", "Bearer "+c.tokens["alice-a"])
		for _, line := range strings.Split(heads, "\r\n") {
			if k, v, ok := strings.Cut(line, ": "); ok && strings.HasPrefix(strings.ToLower(k), "cordon-forwarded") {
				req.Header.Set(k, v)
			}
		}
		replayed := 0
		if r, err := http.DefaultClient.Do(req); err == nil {
			r.Body.Close()
			replayed = r.StatusCode
		}
		t.Fatalf("the sandbox's server got the forwarding headers (a replay of them to n2 answered %d):\n%s", replayed, heads)
	}
}
