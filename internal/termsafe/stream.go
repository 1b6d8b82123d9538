package termsafe

import (
	"io"
	"sync"
)

// Stream is one of cordon's output streams that carries both what a sandbox
// wrote and cordon's own lines. It remembers whether the last byte written
// ended a line, so that a line of cordon's never continues one the sandbox
// left open: text before it on the same line could pass for its start (an
// unterminated {"status":"ok"} before cordon's JSON outcome, a
// "cordon: " before its message).
type Stream struct {
	mu   sync.Mutex
	w    io.Writer
	open bool // the last byte written was not a line feed
}

// NewStream returns a Stream writing to w.
func NewStream(w io.Writer) *Stream { return &Stream{w: w} }

// Write passes p on as it is, for text the sandbox chose.
func (s *Stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(p)
}

func (s *Stream) write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if n > 0 {
		s.open = p[n-1] != '\n'
	}
	return n, err
}

// Own returns a Writer for cordon's own lines on s: each write starts on a
// line of its own, after a line feed if the text before it left one open.
func (s *Stream) Own() io.Writer { return ownWriter{s} }

type ownWriter struct{ s *Stream }

func (o ownWriter) Write(p []byte) (int, error) {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open && len(p) > 0 {
		if _, err := s.write([]byte{'\n'}); err != nil {
			return 0, err
		}
	}
	return s.write(p)
}
