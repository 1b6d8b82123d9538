// Command cordon runs commands, and soon tools, of AI agents in a
// least-privilege sandbox. See README.md.
package main

import (
	"os"

	"github.com/cordon-sandbox/cordon/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:])) }
