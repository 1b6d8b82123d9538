package client

import (
	"context"
	"errors"
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
// all, after the wait Retry-After asks for, each try told to OnRetry;
// past MaxRetries, the 429 is the answer, a *RateLimitError with the wait
// asked for; and the waits never add up to more than MaxWait.
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
	var told []int
	c.Retry.OnRetry = func(attempt int, wait time.Duration, err error) {
		if wait != time.Second || !IsStatus(err, http.StatusTooManyRequests) {
			t.Errorf("OnRetry(%d, %v, %v)", attempt, wait, err)
		}
		told = append(told, attempt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var res api.ExecResult
	if err := c.call(ctx, http.MethodPost, "/x", api.ExecRequest{Args: []string{"true"}}, &res); err != nil || tries.Load() != 3 {
		t.Fatalf("after two 429s: %v, %d tries", err, tries.Load())
	}
	tries.Store(0)
	refuse = 1 << 20
	told = nil
	err := c.call(ctx, http.MethodPost, "/x", api.ExecRequest{Args: []string{"true"}}, &res)
	var rl *RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != time.Second || tries.Load() != int32(DefaultRetryPolicy.MaxRetries)+1 || len(told) != DefaultRetryPolicy.MaxRetries {
		t.Fatalf("always 429: %v, %d tries, told %v", err, tries.Load(), told)
	}
	if !strings.Contains(err.Error(), "sent 4 times over 3s") {
		t.Errorf("the error does not say how often it was sent: %v", err)
	}
	// MaxWait bounds the waits' sum: with 2.5s, two waits of 1s are made.
	tries.Store(0)
	c.Retry = RetryPolicy{MaxRetries: 10, MaxWait: 2500 * time.Millisecond}
	if err := c.call(ctx, http.MethodPost, "/x", api.ExecRequest{Args: []string{"true"}}, &res); !errors.As(err, &rl) || tries.Load() != 3 {
		t.Fatalf("MaxWait 2.5s: %v, %d tries", err, tries.Load())
	}
}

func TestRetryAfter(t *testing.T) {
	for h, want := range map[string]time.Duration{"": time.Second, "x": time.Second, "0": time.Second, "3": 3 * time.Second, "3600": maxWait} {
		if got := retryAfter(h); got != want {
			t.Errorf("Retry-After %q: %v, want %v", h, got, want)
		}
	}
}
