package server

import (
	"sort"
	"time"

	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
)

// session is the task a claimed sandbox serves, seen over its steps (each
// command, upload and download is one): the counters the profile's
// trajectory rules read at checkpoints, as for an MCP session.
type session struct {
	steps        int
	tools        map[string]int // "exec", "files.read", "files.write"
	bytesOut     int64
	bytesIn      int64
	hosts        map[string]bool
	filesRead    map[string]bool
	filesWritten map[string]bool
	denials      int
	refused      []bool
	last         *toolpolicy.Checkpoint // the last rule that held
	lastAt       time.Time              // the last checkpoint
	stopped      *toolpolicy.Checkpoint // a stop rule that held
}

// step counts one step: kind, the file it touched, the outcome of its
// command, and whether it was refused; it returns the trajectory rules of p
// that held at it, and whether a checkpoint was due there. The caller holds
// the entry's lock.
func (s *session) step(p *profile.Profile, kind, path string, o *outcome.Outcome, refused bool, now time.Time) ([]toolpolicy.Checkpoint, bool) {
	if s.tools == nil {
		s.tools, s.hosts, s.filesRead, s.filesWritten = map[string]int{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	}
	s.steps++
	s.tools[kind]++
	switch kind {
	case "files.read":
		if !refused {
			s.filesRead[path] = true
		}
	case "files.write":
		if !refused {
			s.filesWritten[path] = true
		}
	}
	if o != nil {
		for _, ev := range o.Egress {
			s.bytesOut += ev.BytesOut
			s.bytesIn += ev.BytesIn
			if ev.Decision == "deny" {
				refused = true
				s.denials++
			} else if ev.Host != "" {
				s.hosts[ev.Host] = true
			}
		}
	}
	if refused && (o == nil || len(o.Egress) == 0) {
		s.denials++
	}
	s.refused = append(s.refused, refused)
	if len(s.refused) > 1000 {
		s.refused = s.refused[1:]
	}
	if s.stopped != nil || !toolpolicy.Due(p, s.steps) {
		return nil, false
	}
	return s.checkpoint(p, now), true
}

// checkpoint evaluates p's trajectory rules now and returns those that
// held; a stop or approve rule stops the session.
func (s *session) checkpoint(p *profile.Profile, now time.Time) []toolpolicy.Checkpoint {
	if s.stopped != nil {
		return nil
	}
	s.lastAt = now
	cps := toolpolicy.Evaluate(p, s.steps, s.vars(), s.refused)
	for i := range cps {
		s.last = &cps[i]
		if cps[i].Action != "warn" && s.stopped == nil {
			s.stopped = &cps[i]
		}
	}
	return cps
}

// vars is the session as trajectory rules see it (see toolpolicy).
func (s *session) vars() map[string]any {
	tools := map[string]any{}
	for k, n := range s.tools {
		tools[k] = int64(n)
	}
	refused := make([]any, len(s.refused))
	for i, r := range s.refused {
		refused[i] = r
	}
	return map[string]any{
		"steps": int64(s.steps), "calls": int64(s.steps), "tools": tools,
		"bytes_out": s.bytesOut, "bytes_in": s.bytesIn, "deletes": int64(0), "hosts": int64(len(s.hosts)),
		"files_read": int64(len(s.filesRead)), "files_written": int64(len(s.filesWritten)),
		"labels": []any{}, "denials": int64(s.denials), "approvals": int64(0), "approvals_refused": int64(0),
		"refused": refused,
	}
}

func (s *session) api() api.Session {
	out := api.Session{Steps: s.steps, BytesOut: s.bytesOut, BytesIn: s.bytesIn, Denials: s.denials, Hosts: []string{}}
	for h := range s.hosts {
		out.Hosts = append(out.Hosts, h)
	}
	sort.Strings(out.Hosts)
	if s.last != nil {
		out.Checkpoint = s.last.Rule + " (" + s.last.Action + "): " + s.last.Reason
	}
	return out
}
