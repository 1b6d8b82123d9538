package wire

import (
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/cordon-sandbox/cordon/internal/bincode"
	"github.com/cordon-sandbox/cordon/internal/protect"
)

// The Spec reaches init in package bincode's encoding, its length first:
// init decodes it without reflection, so that none of encoding/json's
// work is on the path of a sandbox's start. specMagic changes with every
// change of what is written.
const specMagic = "cordon spec 1\n"

// maxSpec bounds the Spec init reads.
const maxSpec = 64 << 20

// WriteSpec writes s to w, as ReadSpec reads it.
func WriteSpec(w io.Writer, s *Spec) error {
	e := &bincode.Encoder{B: make([]byte, 4, 4096)}
	e.B = append(e.B, specMagic...)
	s.encode(e)
	if len(e.B)-4 > maxSpec {
		return fmt.Errorf("sandbox spec of %d bytes is over %d", len(e.B)-4, maxSpec)
	}
	binary.BigEndian.PutUint32(e.B, uint32(len(e.B)-4))
	_, err := w.Write(e.B)
	return err
}

// ReadSpec decodes a Spec, and returns the rest of r (where Placed follows).
func ReadSpec(r io.Reader) (*Spec, io.Reader, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, nil, fmt.Errorf("reading sandbox spec: %w", err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxSpec {
		return nil, nil, fmt.Errorf("reading sandbox spec: %d bytes is over %d", size, maxSpec)
	}
	// Read as it arrives: a length its bytes do not follow costs nothing.
	b, err := io.ReadAll(io.LimitReader(r, int64(size)))
	if err != nil {
		return nil, nil, fmt.Errorf("reading sandbox spec: %w", err)
	}
	if len(b) != int(size) {
		return nil, nil, fmt.Errorf("reading sandbox spec: %w", io.ErrUnexpectedEOF)
	}
	var s Spec
	if err := s.decode(b); err != nil {
		return nil, nil, fmt.Errorf("reading sandbox spec: %w", err)
	}
	return &s, r, nil
}

func (s *Spec) encode(e *bincode.Encoder) {
	e.String(s.Hostname)
	e.String(s.UserName)
	e.Int(int64(s.UID))
	e.Int(int64(s.GID))
	e.String(s.Home)
	e.Uint(uint64(len(s.Mounts)))
	for i := range s.Mounts {
		s.Mounts[i].encode(e)
	}
	e.Int(s.TmpSize)
	for _, v := range []int64{s.Rlimits.CPUSeconds, s.Rlimits.FileSize, s.Rlimits.OpenFiles, s.Rlimits.Processes, s.Rlimits.Data} {
		e.Int(v)
	}
	e.String(s.Workdir)
	e.Strings(s.Env)
	e.Strings(s.Args)
	e.String(s.Path)
	e.Bool(s.SelfExec)
	w := s.Weaken
	for _, v := range []bool{w.NetNS, w.UsernsLimit, w.Caps, w.ProcMasks, w.IPCNS, w.Dumpable, w.FDs, w.UTSNS, w.NNP, w.InitSignals, w.UserLimits, w.Refer} {
		e.Bool(v)
	}
	for _, v := range []bool{s.Landlock, s.Seccomp, s.TTY} {
		e.Bool(v)
	}
	e.String(s.ProxyAddr)
	e.Bool(s.Transparent)
	e.String(s.GitIgnore)
	e.Uint(uint64(len(s.Placeholders)))
	for _, id := range s.Placeholders {
		e.Uint(id.Dev)
		e.Uint(id.Ino)
	}
	e.Bool(s.Layer != nil)
	if l := s.Layer; l != nil {
		e.Int(l.Size)
		e.Int(l.Inodes)
		e.String(l.Dir)
		e.Int(int64(l.Tree))
	}
	e.Bool(s.Serve)
}

func (s *Spec) decode(b []byte) error {
	d := &bincode.Decoder{B: b}
	d.Magic(specMagic)
	s.Hostname, s.UserName = d.String(), d.String()
	s.UID, s.GID = d.Small(), d.Small()
	s.Home = d.String()
	if n := d.Count(10); n > 0 {
		s.Mounts = make([]Mount, 0, bincode.Prealloc(n))
		for range n {
			var m Mount
			m.decode(d)
			s.Mounts = append(s.Mounts, m)
		}
	}
	s.TmpSize = d.Int()
	r := &s.Rlimits
	for _, v := range []*int64{&r.CPUSeconds, &r.FileSize, &r.OpenFiles, &r.Processes, &r.Data} {
		*v = d.Int()
	}
	s.Workdir = d.String()
	s.Env, s.Args = d.Strings(), d.Strings()
	s.Path = d.String()
	s.SelfExec = d.Bool()
	w := &s.Weaken
	for _, v := range []*bool{&w.NetNS, &w.UsernsLimit, &w.Caps, &w.ProcMasks, &w.IPCNS, &w.Dumpable, &w.FDs, &w.UTSNS, &w.NNP, &w.InitSignals, &w.UserLimits, &w.Refer} {
		*v = d.Bool()
	}
	for _, v := range []*bool{&s.Landlock, &s.Seccomp, &s.TTY} {
		*v = d.Bool()
	}
	s.ProxyAddr = d.String()
	s.Transparent = d.Bool()
	s.GitIgnore = d.String()
	if n := d.Count(2); n > 0 {
		s.Placeholders = make([]protect.ID, 0, bincode.Prealloc(n))
		for range n {
			s.Placeholders = append(s.Placeholders, protect.ID{Dev: d.Uint(), Ino: d.Uint()})
		}
	}
	if d.Bool() {
		s.Layer = &Layer{Size: d.Int(), Inodes: d.Int(), Dir: d.String(), Tree: d.Small()}
	}
	s.Serve = d.Bool()
	return d.End()
}

func (m *Mount) encode(e *bincode.Encoder) {
	e.String(m.Source)
	e.String(m.Target)
	for _, v := range []bool{m.Writable, m.Optional, m.Device} {
		e.Bool(v)
	}
	e.Int(int64(m.Tree))
	e.String(m.Link)
	e.Bool(m.Missing)
	e.Uint(uint64(len(m.Protect)))
	for _, p := range m.Protect {
		e.String(p.Rel)
		e.Bool(p.ReadOnly)
	}
	e.Strings(m.Mask)
	e.Bool(m.Review)
}

func (m *Mount) decode(d *bincode.Decoder) {
	m.Source, m.Target = d.String(), d.String()
	for _, v := range []*bool{&m.Writable, &m.Optional, &m.Device} {
		*v = d.Bool()
	}
	m.Tree = d.Small()
	m.Link = d.String()
	m.Missing = d.Bool()
	if n := d.Count(2); n > 0 {
		m.Protect = make([]protect.Entry, 0, bincode.Prealloc(n))
		for range n {
			m.Protect = append(m.Protect, protect.Entry{Rel: d.String(), ReadOnly: d.Bool()})
		}
	}
	m.Mask = d.Strings()
	m.Review = d.Bool()
}

// AppendJSON appends s as JSON, as encoding/json writes it, without
// reflection: init reports with it.
func (s Status) AppendJSON(b []byte) []byte {
	b = append(b, `{"event":`...)
	b = appendJSONString(b, s.Event)
	num := func(name string, v int64) {
		if v != 0 {
			b = append(b, `,"`+name+`":`...)
			b = strconv.AppendInt(b, v, 10)
		}
	}
	str := func(name, v string) {
		if v != "" {
			b = append(b, `,"`+name+`":`...)
			b = appendJSONString(b, v)
		}
	}
	if s.ID != 0 {
		b = append(b, `,"id":`...)
		b = strconv.AppendUint(b, s.ID, 10)
	}
	str("stage", s.Stage)
	str("error", s.Error)
	num("code", int64(s.Code))
	num("signal", int64(s.Signal))
	num("landlock_abi", int64(s.LandlockABI))
	num("pid", int64(s.Pid))
	str("note", s.Note)
	num("tmp_used", s.TmpUsed)
	num("other_signal", int64(s.OtherSignal))
	return append(b, '}')
}

// appendJSONString appends v as a JSON string: control characters, quotes,
// backslashes and invalid UTF-8 escaped, the rest as it is.
func appendJSONString(b []byte, v string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(v); {
		c := v[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(v[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, v[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
