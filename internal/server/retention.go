package server

import (
	"context"
	"fmt"
	"time"

	"github.com/cordon-sandbox/cordon/internal/audit"
)

// retainEvery is how often the audit retention runs.
const retainEvery = time.Minute

// retainer applies the audit retention at start and every retainEvery.
func (s *Server) retainer() {
	defer s.wg.Done()
	t := time.NewTicker(retainEvery)
	defer t.Stop()
	for {
		if err := s.retain(); err != nil {
			s.logf("%v", err)
		}
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// retain removes (or archives) the audit log's oldest rotated files past
// audit_retention, recording which first; the index drops what they held
// and what is older than max_age, and sessions not described for max_age
// are forgotten.
func (s *Server) retain() error {
	r := s.opts.Config.AuditRetention
	now := s.opts.Now()
	gone, err := s.opts.Audit.Retain(audit.Retention{MaxBytes: r.bytes, MaxAge: r.age, Archive: r.Archive}, now)
	for _, g := range gone {
		s.metrics.add(1, "cordon_audit_files_removed_total", "reason", g.Reason)
		s.logf("audit retention: %s (%d bytes, records %d to %d) %s (%s)", g.File, g.Bytes, g.FirstSeq, g.LastSeq, map[bool]string{true: "archived", false: "removed"}[r.Archive != ""], g.Reason)
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(gone) > 0 {
		if _, err := s.opts.DB.PruneAudit(ctx, s.opts.Node, gone[len(gone)-1].LastTime); err != nil {
			return fmt.Errorf("audit retention: %w", err)
		}
	}
	if r.age > 0 {
		if _, err := s.opts.DB.PruneAudit(ctx, "", now.Add(-r.age)); err != nil {
			return fmt.Errorf("audit retention: %w", err)
		}
		if _, err := s.opts.DB.PruneSessions(ctx, now.Add(-r.age)); err != nil {
			return fmt.Errorf("audit retention: %w", err)
		}
	}
	return nil
}
