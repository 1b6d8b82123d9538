package client

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
)

// A request refused with 429 (nothing was done) is sent again, body and
// all, after the wait Retry-After asks for; past maxRetries, the 429 is
// the answer.
func TestRetriesTooManyRequests(t *testing.T) {
	var tries atomic.Int32
	refuse := int32(2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(b), `"args":["true"]`) {
			t.Errorf("try %d sent %q", tries.Load(), b)
		}
		if tries.Add(1) <= refuse {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":"too many requests"}`)
			return
		}
		io.WriteString(w, `{"outcome":{"status":"ok"}}`)
	}))
	defer srv.Close()
	c := New(srv.URL, "t")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var res api.ExecResult
	if err := c.call(ctx, http.MethodPost, "/x", api.ExecRequest{Args: []string{"true"}}, &res); err != nil || tries.Load() != 3 {
		t.Fatalf("after two 429s: %v, %d tries", err, tries.Load())
	}
	tries.Store(0)
	refuse = 1 << 20
	if err := c.call(ctx, http.MethodPost, "/x", api.ExecRequest{Args: []string{"true"}}, &res); !IsStatus(err, http.StatusTooManyRequests) || tries.Load() != maxRetries+1 {
		t.Fatalf("always 429: %v, %d tries", err, tries.Load())
	}
}

func TestRetryAfter(t *testing.T) {
	for h, want := range map[string]time.Duration{"": time.Second, "x": time.Second, "0": time.Second, "3": 3 * time.Second, "3600": maxWait} {
		if got := retryAfter(h); got != want {
			t.Errorf("Retry-After %q: %v, want %v", h, got, want)
		}
	}
}
