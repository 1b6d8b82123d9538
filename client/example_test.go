package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/cordon-sandbox/cordon/client"
)

// A sandbox's life: create it, run a command with its output streamed,
// write, read and list files, kill it.
func Example() {
	ctx := context.Background()
	c := client.New(os.Getenv("CORDON_URL"), os.Getenv("CORDON_TOKEN"))
	sb, err := c.CreateSandbox(ctx, "") // the token's own agent
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sb.Info.State)

	// The output comes to os.Stdout as the command writes it; the result
	// holds it too.
	res, err := sb.Commands.Run(ctx, "mkdir notes; echo hello from $(pwd); echo a warning >&2", &client.RunOptions{Stdout: os.Stdout})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("exit %d, stderr %q\n", res.ExitCode, res.Stderr)

	if err := sb.Files.Write(ctx, "/workspace/notes/todo.txt", []byte("written from Go\n")); err != nil {
		log.Fatal(err)
	}
	data, err := sb.Files.Read(ctx, "/workspace/notes/todo.txt")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("read %q\n", data)
	entries, err := sb.Files.List(ctx, "/workspace/notes")
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Println(e.Name, e.Type, e.Size)
	}

	if err := sb.KeepAlive(ctx); err != nil { // restarts its idle timeout
		log.Fatal(err)
	}
	if err := sb.Kill(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(sb.Info.State, sb.Info.Ended)
	// Output:
	// running
	// hello from /workspace
	// exit 0, stderr "a warning\n"
	// read "written from Go\n"
	// todo.txt file 16
	// ended killed
}

// A command that fails is an error carrying its result; one that a limit
// ended is a LimitError, with the limit's status and name.
func ExampleLimitError() {
	ctx := context.Background()
	c := client.New(os.Getenv("CORDON_URL"), os.Getenv("CORDON_TOKEN"))
	sb, err := c.CreateSandbox(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Kill(ctx)

	_, err = sb.Commands.Run(ctx, "echo failing; exit 3", nil)
	var ce *client.CommandExitError
	if errors.As(err, &ce) {
		fmt.Println(ce.Status, ce.ExitCode, ce.Stdout)
	}

	_, err = sb.Commands.Run(ctx, "sleep 20", &client.RunOptions{Timeout: 300 * time.Millisecond})
	var le *client.LimitError
	if errors.As(err, &le) {
		fmt.Println(le.Status, le.ExitCode, le.Limit().Name, le.Limit().Value)
	}

	// The profile allows 64 MiB: a command that takes more ends the
	// sandbox (its Info.Ended then says "memory").
	_, err = sb.Commands.Run(ctx, "tail /dev/zero", nil)
	if errors.As(err, &le) {
		fmt.Println(le.Status, le.ExitCode, le.Limit().Name)
	}
	// Output:
	// exit_nonzero 3 failing
	//
	// timeout 124 timeout 300ms
	// memory_limit 121 memory
}

// Errors of the server itself: no such sandbox, a token refused.
func ExampleIsNotFound() {
	ctx := context.Background()
	c := client.New(os.Getenv("CORDON_URL"), os.Getenv("CORDON_TOKEN"))
	_, err := c.ConnectSandbox("sb-0000000000000000").Commands.Run(ctx, "true", nil)
	fmt.Println(client.IsNotFound(err))

	_, err = client.New(os.Getenv("CORDON_URL"), "not-a-token").CreateSandbox(ctx, "")
	fmt.Println(client.IsAuth(err))
	// Output:
	// true
	// true
}
