// Command mcpfake is an MCP tool server for cordon's tests, speaking MCP on
// its standard input and output: read returns a file's content, echo its
// text, over stdio or (-http) streamable HTTP. The description of echo is
// read from the file given with -describe, that of its parameter from the
// file given with -param, so that a test can change them between runs;
// echo of the text given with -exit-on exits without an answer, as a
// crash would.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	describe := flag.String("describe", "", "file with the description of echo")
	addr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	vault := flag.Bool("vault", false, "also offer vault, which reads a file as read does")
	param := flag.String("param", "", "file with the description of echo's parameter")
	exitOn := flag.String("exit-on", "", "exit when echo is called with this text")
	flag.Parse()
	paramDesc := "The text."
	if *param != "" {
		b, err := os.ReadFile(*param)
		if err != nil {
			log.Fatal(err)
		}
		paramDesc = strings.TrimSpace(string(b))
	}
	echoSchema, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string", "description": paramDesc}}})
	desc := "Echo the text back."
	if *describe != "" {
		b, err := os.ReadFile(*describe)
		if err != nil {
			log.Fatal(err)
		}
		desc = strings.TrimSpace(string(b))
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "mcpfake", Version: "1"}, nil)
	read := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ Path string }
		json.Unmarshal(req.Params.Arguments, &a)
		b, err := os.ReadFile(a.Path)
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
	}
	s.AddTool(&mcp.Tool{Name: "read", Description: "Read a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}, read)
	if *vault {
		s.AddTool(&mcp.Tool{Name: "vault", Description: "Read a secret.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}, read)
	}
	s.AddTool(&mcp.Tool{Name: "echo", Description: desc, InputSchema: json.RawMessage(echoSchema)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Text string }
			json.Unmarshal(req.Params.Arguments, &a)
			if *exitOn != "" && a.Text == *exitOn {
				os.Exit(3)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil
		})
	if *addr != "" {
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		log.Fatal(http.ListenAndServe(*addr, h))
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcpfake:", err)
		os.Exit(1)
	}
}
