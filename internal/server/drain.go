package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/cordon-sandbox/cordon/internal/statedb"
)

// DefaultDrainGrace is how long a stopping server lets running requests
// finish before it ends their sandboxes.
const DefaultDrainGrace = 30 * time.Second

// enter counts a request in (see Drain); it reports false when the server
// is draining and the request must be refused.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining || s.closed {
		return false
	}
	s.inflight++
	return true
}

// isDraining reports whether the server takes no new requests.
func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining || s.closed
}

// leave counts a request out.
func (s *Server) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight--
	if s.inflight == 0 && s.drained != nil {
		close(s.drained)
		s.drained = nil
	}
}

// refuseDraining answers a request that came while the server drains.
func refuseDraining(w http.ResponseWriter) int {
	w.Header().Set("Retry-After", "5")
	return fail(w, http.StatusServiceUnavailable, "the server is stopping: it takes no new requests; send this one to another node, or again once it restarted")
}

// Drain stops taking requests (every one but the public ones is answered
// 503 with Retry-After from now on) and waits until those running, a
// command's among them, have answered, or ctx ends. Close then ends the
// sandboxes.
func (s *Server) Drain(ctx context.Context) error {
	// The other nodes place no new sandboxes here from now on.
	s.drainAsked.Store(true)
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if _, err := s.opts.DB.SetNodeState(dctx, s.opts.Node, s.inc(), statedb.NodeAlive, statedb.NodeDraining); err != nil {
		s.logf("draining: %v", err)
	}
	cancel()
	s.mu.Lock()
	if !s.draining {
		close(s.drainBegan)
	}
	s.draining = true
	if s.inflight == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.drained == nil {
		s.drained = make(chan struct{})
	}
	done, n := s.drained, s.inflight
	s.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("draining: %d requests still running: %w", n, context.Cause(ctx))
	}
}
