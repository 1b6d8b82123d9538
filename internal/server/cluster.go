package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cordon-sandbox/cordon/internal/statedb"
)

// clusterFull says, without a lock, whether the cluster has its
// max_sandboxes already: a claim that would be refused takes no sandbox.
func (s *Server) clusterFull() error {
	max := s.opts.Config.MaxSandboxes
	if max == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	live, err := s.opts.DB.LiveSessions(ctx, s.longestLifetime(), s.opts.Now())
	switch {
	case err != nil:
		return fmt.Errorf("%w: counting the cluster's sandboxes: %v", errUnavailable, err)
	case live >= max:
		return fmt.Errorf("%w: %v (%d; max_sandboxes: %d, every node)", errTooMany, statedb.ErrFull, live, max)
	}
	return nil
}

func (s *Server) longestLifetime() time.Duration {
	within := DefaultMaxLifetime
	for _, a := range s.opts.Config.Agents {
		within = maxDuration(within, a.Lifetime)
	}
	return within
}

// reserveCluster counts a sandbox being claimed against the cluster's
// max_sandboxes (every agent, every node sharing the database), and
// records its session in the same transaction; without such a bound, a
// node that others forward to records the session alone.
func (s *Server) reserveCluster(e *entry) error {
	max := s.opts.Config.MaxSandboxes
	if max == 0 && s.advertise() == "" {
		return nil
	}
	within := s.longestLifetime()
	info := e.info()
	info.Node = s.opts.Node
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if max == 0 {
		// The other nodes find the sandbox by its session (relay.go):
		// it is there before the create is answered.
		if err := s.opts.DB.PutSession(ctx, e.id, s.opts.Node, e.agent.Name, info); err != nil {
			return fmt.Errorf("%w: recording the sandbox for the other nodes: %v", errUnavailable, err)
		}
		return nil
	}
	err := s.opts.DB.ReserveSession(ctx, e.id, s.opts.Node, e.agent.Name, info, max, within, s.opts.Now())
	if errors.Is(err, statedb.ErrFull) {
		return fmt.Errorf("%w: %v (max_sandboxes: %d, every node)", errTooMany, err, max)
	}
	if err != nil {
		// Fail closed: with no count, no sandbox.
		return fmt.Errorf("%w: counting the cluster's sandboxes: %v", errUnavailable, err)
	}
	return nil
}

func maxDuration(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}
