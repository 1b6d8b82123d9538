package gateway

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// unproxied refuses the requests of the parts of MCP the gateway does not
// proxy: resources, prompts and their completions. What they bring is put
// before the model without a call the policy could decide, label or pin,
// so the gateway does not advertise them, and a client that asks anyway
// gets an error that says so rather than an empty list.
func (g *Gateway) unproxied(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		what, _, _ := strings.Cut(method, "/")
		switch what {
		case "resources", "prompts", "completion":
			// Not "method not found": the SDK puts its own message on that.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf(
				"cordon does not proxy %s: the gateway offers only tools, whose every call its policy decides; resources and prompts would reach the model unpinned and undecided", method)}
		}
		return next(ctx, method, req)
	}
}
