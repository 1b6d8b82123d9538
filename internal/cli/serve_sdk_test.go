package cli_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/client"
)

// The Go client's side of the SDKs' shared scenario, against a real
// cordon serve: a sandbox created with an environment and a timeout, a
// streamed command, a background one waited for and one killed, a
// terminal, files and their names, a directory as tar and back, a port a
// request without a token opens through a port URL, and a limit as a
// typed error. (sdk/python and sdk/typescript run the same against their
// own serve.)
func TestServeSDKScenario(t *testing.T) {
	s := startServe(t, "  sdk:\n    profile: sdk.yaml\n", map[string]string{"sdk.yaml": testProfile("sdk", "  wall: 1m\n")})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := s.client("sdk")
	sb, err := c.CreateSandboxWith(ctx, client.CreateOptions{Env: map[string]string{"X": "sandbox"}, Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Kill(context.Background())

	var streamed bytes.Buffer
	res, err := sb.Commands.Run(ctx, `echo "$X $Y"`, &client.RunOptions{Env: map[string]string{"Y": "command"}, Stdout: &streamed})
	if err != nil || res.Stdout != "sandbox command\n" || streamed.String() != res.Stdout || res.Status != client.StatusOK {
		t.Fatalf("a streamed command: %+v %v (streamed %q)", res, err, streamed.String())
	}

	quick, err := sb.Commands.Start(ctx, "echo started; exit 3", nil)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := sb.Commands.StartArgs(ctx, []string{"sleep", "30"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ce *client.CommandExitError
	if res, err := quick.Wait(ctx); !errors.As(err, &ce) || res.ExitCode != 3 || res.Stdout != "started\n" {
		t.Errorf("waiting for a background command: %+v %v", res, err)
	}
	if err := slow.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if res, _ := slow.Wait(ctx); res == nil || res.Status != client.StatusSignaled {
		t.Errorf("a killed background command: %+v", res)
	}

	term, err := sb.Terminal(ctx, client.TerminalOptions{Args: []string{"sh", "-c", "stty size; exit 4"}, Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	var screen bytes.Buffer
	if o, err := term.Wait(&screen); err != nil || o.ExitCode != 4 || !strings.Contains(screen.String(), "30 100") {
		t.Errorf("a terminal: %+v %v %q", o, err, screen.String())
	}

	// A watch is in place when it returns: what a command then does
	// under the directory comes as events. A new directory is watched
	// once its event came (what it held before is reported as made).
	watch, err := sb.Files.WatchDir(ctx, "/workspace", true)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, step := range []struct {
		cmd  string
		want []string
	}{
		{"mkdir -p /workspace/w/x", []string{"create w/", "create w/x/"}},
		{"echo hi > /workspace/w/x/f", []string{"create w/x/f"}},
		{"rm -r /workspace/w", []string{"remove w/x/f", "remove w/"}},
	} {
		if _, err := sb.Commands.Run(ctx, step.cmd, nil); err != nil {
			t.Fatal(err)
		}
		for want := step.want; len(want) > 0; {
			e, err := watch.Next()
			if err != nil {
				t.Fatalf("watching /workspace: %v after %q (ended: %q)", err, seen, watch.EndReason)
			}
			s := e.Type + " " + e.Name
			if e.IsDir {
				s += "/"
			}
			seen = append(seen, s)
			if s == want[0] {
				want = want[1:]
			}
		}
	}
	if err := watch.Stop(); err != nil {
		t.Fatal(err)
	}

	if err := sb.Files.Write(ctx, "/workspace/index.html", []byte("<p>served</p>")); err != nil {
		t.Fatal(err)
	}
	if made, err := sb.Files.MakeDir(ctx, "/workspace/out/deep"); err != nil || !made {
		t.Fatalf("make_dir: %v %v", made, err)
	}
	if err := sb.Files.Rename(ctx, "/workspace/index.html", "/workspace/out/deep/index.html"); err != nil {
		t.Fatal(err)
	}
	if info, err := sb.Files.GetInfo(ctx, "/workspace/out/deep/index.html"); err != nil || info.Size != 13 || info.Type != "file" {
		t.Errorf("get_info: %+v %v", info, err)
	}
	if there, err := sb.Files.Exists(ctx, "/workspace/index.html"); err != nil || there {
		t.Errorf("exists after the rename: %v %v", there, err)
	}
	var tarball bytes.Buffer
	if _, err := sb.Files.ReadTar(ctx, "/workspace/out", &tarball); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Files.MakeDir(ctx, "/workspace/copy"); err != nil {
		t.Fatal(err)
	}
	if r, err := sb.Files.WriteTar(ctx, "/workspace/copy", &tarball); err != nil || r.Entries < 2 {
		t.Fatalf("write_tar: %+v %v", r, err)
	}
	if b, err := sb.Files.Read(ctx, "/workspace/copy/deep/index.html"); err != nil || string(b) != "<p>served</p>" {
		t.Fatalf("the copy: %q %v", b, err)
	}
	if err := sb.Files.Remove(ctx, "/workspace/copy"); err != nil {
		t.Fatal(err)
	}

	// A server in a session of its own outlives the command that started it.
	if _, err := sb.Commands.RunArgs(ctx, []string{"python3", "-c", "import subprocess; subprocess.Popen(['python3', '-m', 'http.server', '8125', '--bind', '127.0.0.1'], cwd='/workspace/out/deep', start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)"}, nil); err != nil {
		t.Fatal(err)
	}
	u, err := sb.PortURL(ctx, 8125, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var body string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(u + "index.html") // no token
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway || time.Now().After(deadline) {
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("through the port URL: %d %s", resp.StatusCode, b)
			}
			body = string(b)
			break
		}
	}
	if body != "<p>served</p>" {
		t.Errorf("through the port URL: %q", body)
	}

	var le *client.LimitError
	if _, err := sb.Commands.Run(ctx, "sleep 30", &client.RunOptions{Timeout: 300 * time.Millisecond}); !errors.As(err, &le) || le.Status != client.StatusTimeout || le.ExitCode != 124 {
		t.Errorf("a timeout: %v", err)
	}
}
