package server

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

func TestTerminalControl(t *testing.T) {
	ctx := context.Background()
	var in bytes.Buffer
	resize, sigs := make(chan sandbox.Winsize, 1), make(chan syscall.Signal, 1)
	if err := terminalControl(ctx, []byte(`{"type":"input","data":"bHMK"}`), &in, resize, sigs); err != nil || in.String() != "ls\n" {
		t.Errorf("input: %q %v", in.String(), err)
	}
	if err := terminalControl(ctx, []byte(`{"type":"resize","rows":50,"cols":200}`), &in, resize, sigs); err != nil || <-resize != (sandbox.Winsize{Rows: 50, Cols: 200}) {
		t.Errorf("resize: %v", err)
	}
	if err := terminalControl(ctx, []byte(`{"type":"signal","signal":"SIGINT"}`), &in, resize, sigs); err != nil || <-sigs != syscall.SIGINT {
		t.Errorf("signal: %v", err)
	}
	for _, bad := range []string{
		`{"type":"resize","rows":0,"cols":80}`, `{"type":"resize","rows":24,"cols":1001}`,
		`{"type":"signal","signal":"SIGSEGV"}`, `{"type":"signal","signal":"9"}`,
		`{"type":"exec","data":"bHMK"}`, `{"type":"input","extra":1}`, `{"type":"input"} {}`, `ls`,
	} {
		if err := terminalControl(ctx, []byte(bad), &in, resize, sigs); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	// A send nobody takes ends with the request.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	resize <- sandbox.Winsize{}
	if err := terminalControl(cctx, []byte(`{"type":"resize","rows":1,"cols":1}`), &in, resize, sigs); err != nil {
		t.Error(err)
	}
}

func TestTerminalOptions(t *testing.T) {
	o, err := terminalOptions(httptest.NewRequest("GET", "/t", nil))
	if err != nil || strings.Join(o.Args, " ") != "/bin/sh" || o.Terminal.Rows != 24 || o.Terminal.Cols != 80 {
		t.Errorf("defaults: %+v %v", o, err)
	}
	o, err = terminalOptions(httptest.NewRequest("GET", "/t?arg=bash&arg=-l&rows=50&cols=132&dir=/tmp&timeout=1m", nil))
	if err != nil || strings.Join(o.Args, " ") != "bash -l" || o.Terminal.Rows != 50 || o.Dir != "/tmp" || o.Timeout.String() != "1m0s" {
		t.Errorf("given: %+v %v", o, err)
	}
	for _, q := range []string{"rows=0", "cols=1001", "rows=x", "dir=rel", "timeout=5"} {
		if _, err := terminalOptions(httptest.NewRequest("GET", "/t?"+q, nil)); err == nil {
			t.Errorf("accepted %s", q)
		}
	}
}
