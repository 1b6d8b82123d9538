package cli

import (
	"fmt"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/profile"
)

// toolExamples are the example profiles (examples/profiles/) that offer the
// agent tools; a test keeps the list in step with the directory.
var toolExamples = []string{"mcp-coding-agent.yaml", "mcp-files-and-web.yaml", "tool-research.yaml"}

// offersTools reports whether the profile offers the agent any tool: one
// under tools that it does not deny (a server's tool is offered once its
// pin matches, which only the gateway can tell).
func offersTools(p *profile.Profile) bool {
	for _, t := range p.Tools {
		if !t.Deny {
			return true
		}
	}
	return false
}

// noTools is the error of cordon mcp for a profile that offers no tool.
func noTools(file string) error {
	if file == "" {
		file = "the default profile"
	}
	ex := make([]string, len(toolExamples))
	for i, name := range toolExamples {
		ex[i] = "examples/profiles/" + name
	}
	return fmt.Errorf("%s offers no tool: an agent would find nothing to call. Name the tools it may call under tools: (see docs/PROFILES.md), or start from an example profile that offers some: %s",
		file, strings.Join(ex, ", "))
}
