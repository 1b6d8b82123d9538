package gateway_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/cordon-sandbox/cordon/internal/gateway"
)

// A tool server's answer past the bound fails the call it answers, with
// its id, and the connection goes on: the next answer is read as usual.
// The SDK's own transport ends the connection there, which the gateway
// would count as the server breaking.
func TestCommandTransportBoundsAnswers(t *testing.T) {
	script := `printf '{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"'
head -c 3000000 /dev/zero | tr '\0' a
printf '"}]}}\n{"jsonrpc":"2.0","id":8,"result":{}}\n'
sleep 1`
	var got []gateway.Oversized
	tr := gateway.CommandTransport(exec.Command("sh", "-c", script), 1<<20, func(o gateway.Oversized) { got = append(got, o) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := tr.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	first, err := conn.Read(ctx)
	if err != nil {
		t.Fatalf("the connection did not go on past the large answer: %v", err)
	}
	r, ok := first.(*jsonrpc.Response)
	if !ok || fmt.Sprint(r.ID.Raw()) != "7" || r.Error == nil || !strings.Contains(r.Error.Error(), "more than the bound of 1048576 bytes") {
		t.Fatalf("the large answer became %#v (%v)", first, r.Error)
	}
	second, err := conn.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := second.(*jsonrpc.Response); !ok || fmt.Sprint(r.ID.Raw()) != "8" || r.Error != nil {
		t.Fatalf("the next answer: %#v", second)
	}
	if len(got) != 1 || got[0].Bytes < 3000000 || len(got[0].SHA256) != 64 || string(got[0].ID) != "7" {
		t.Fatalf("told of: %+v", got)
	}
}
