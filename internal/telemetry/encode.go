package telemetry

import (
	"encoding/binary"
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The OTLP trace messages are written by hand in protobuf's wire format
// (opentelemetry-proto, trace/v1 and common/v1), field numbers as there:
// the generated types would bring a protobuf runtime and gRPC into every
// cordon process for the few that send traces.

// pb is a protobuf message being written.
type pb []byte

const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

func (b *pb) tag(field, wire int) { *b = binary.AppendUvarint(*b, uint64(field)<<3|uint64(wire)) }

func (b *pb) varint(field int, v uint64) {
	b.tag(field, wireVarint)
	*b = binary.AppendUvarint(*b, v)
}

// uint is a scalar field, left out when zero as proto3 leaves it.
func (b *pb) uint(field int, v uint64) {
	if v != 0 {
		b.varint(field, v)
	}
}

func (b *pb) fixed64(field int, v uint64) {
	if v != 0 {
		b.tag(field, wireFixed64)
		*b = binary.LittleEndian.AppendUint64(*b, v)
	}
}

func (b *pb) fixed32(field int, v uint32) {
	if v != 0 {
		b.tag(field, wireFixed32)
		*b = binary.LittleEndian.AppendUint32(*b, v)
	}
}

// bytes is a length-delimited field, always written (oneof members are
// written even when empty).
func (b *pb) bytes(field int, v []byte) {
	b.tag(field, wireBytes)
	*b = binary.AppendUvarint(*b, uint64(len(v)))
	*b = append(*b, v...)
}

// str is a string field, left out when empty.
func (b *pb) str(field int, s string) {
	if s != "" {
		b.tag(field, wireBytes)
		*b = binary.AppendUvarint(*b, uint64(len(s)))
		*b = append(*b, s...)
	}
}

// msg writes a nested message that fill writes.
func (b *pb) msg(field int, fill func(*pb)) {
	var m pb
	fill(&m)
	b.bytes(field, m)
}

func clamp32(n int) uint64 { return uint64(min(max(n, 0), math.MaxUint32)) }

func unixNano(ns int64) uint64 { return uint64(max(ns, 0)) }

// exportRequest encodes an ExportTraceServiceRequest holding spans,
// grouped by resource, then by instrumentation scope, in their order.
func exportRequest(spans []sdktrace.ReadOnlySpan) []byte {
	type scoped struct {
		scope instrumentation.Scope
		spans []sdktrace.ReadOnlySpan
	}
	type resourced struct {
		res    *resource.Resource
		scopes []*scoped
	}
	var groups []*resourced
	for _, s := range spans {
		var r *resourced
		for _, g := range groups {
			if g.res.Equal(s.Resource()) {
				r = g
			}
		}
		if r == nil {
			r = &resourced{res: s.Resource()}
			groups = append(groups, r)
		}
		var sc *scoped
		for _, g := range r.scopes {
			if g.scope.Name == s.InstrumentationScope().Name && g.scope.Version == s.InstrumentationScope().Version &&
				g.scope.SchemaURL == s.InstrumentationScope().SchemaURL {
				sc = g
			}
		}
		if sc == nil {
			sc = &scoped{scope: s.InstrumentationScope()}
			r.scopes = append(r.scopes, sc)
		}
		sc.spans = append(sc.spans, s)
	}
	var req pb
	for _, g := range groups {
		req.msg(1, func(rs *pb) { // ResourceSpans
			if g.res != nil {
				rs.msg(1, func(r *pb) { keyValues(r, 1, g.res.Attributes()) })
				rs.str(3, g.res.SchemaURL())
			}
			for _, sc := range g.scopes {
				rs.msg(2, func(ss *pb) { // ScopeSpans
					ss.msg(1, func(is *pb) {
						is.str(1, sc.scope.Name)
						is.str(2, sc.scope.Version)
						keyValues(is, 3, sc.scope.Attributes.ToSlice())
					})
					for _, s := range sc.spans {
						ss.msg(2, func(m *pb) { span(m, s) })
					}
					ss.str(3, sc.scope.SchemaURL)
				})
			}
		})
	}
	return req
}

// span writes a Span.
func span(m *pb, s sdktrace.ReadOnlySpan) {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	m.bytes(1, tid[:])
	m.bytes(2, sid[:])
	m.str(3, sc.TraceState().String())
	if psid := s.Parent().SpanID(); psid.IsValid() {
		m.bytes(4, psid[:])
	}
	m.str(5, s.Name())
	m.uint(6, uint64(spanKind(s.SpanKind())))
	m.fixed64(7, unixNano(s.StartTime().UnixNano()))
	m.fixed64(8, unixNano(s.EndTime().UnixNano()))
	keyValues(m, 9, s.Attributes())
	m.uint(10, clamp32(s.DroppedAttributes()))
	for _, e := range s.Events() {
		m.msg(11, func(ev *pb) {
			ev.fixed64(1, unixNano(e.Time.UnixNano()))
			ev.str(2, e.Name)
			keyValues(ev, 3, e.Attributes)
			ev.uint(4, clamp32(e.DroppedAttributeCount))
		})
	}
	m.uint(12, clamp32(s.DroppedEvents()))
	for _, l := range s.Links() {
		m.msg(13, func(lk *pb) {
			tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			lk.bytes(1, tid[:])
			lk.bytes(2, sid[:])
			lk.str(3, l.SpanContext.TraceState().String())
			keyValues(lk, 4, l.Attributes)
			lk.uint(5, clamp32(l.DroppedAttributeCount))
			lk.fixed32(6, flags(l.SpanContext.TraceFlags(), l.SpanContext))
		})
	}
	m.uint(14, clamp32(s.DroppedLinks()))
	st := s.Status()
	m.msg(15, func(m *pb) {
		m.str(2, st.Description)
		m.uint(3, statusCode(st.Code))
	})
	m.fixed32(16, flags(sc.TraceFlags(), s.Parent()))
}

// flags are a span's W3C trace flags, with the bits that say whether its
// parent is known to be remote, and is.
func flags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	const hasIsRemote, isRemote = 0x100, 0x200
	f := uint32(tf) | hasIsRemote
	if parent.IsRemote() {
		f |= isRemote
	}
	return f
}

// spanKind is OTLP's SpanKind: the same numbers as the API's, unknown
// ones unspecified.
func spanKind(k trace.SpanKind) int {
	if k < trace.SpanKindInternal || k > trace.SpanKindConsumer {
		return 0
	}
	return int(k)
}

// statusCode is OTLP's StatusCode (unset 0, ok 1, error 2), which orders
// them unlike the API.
func statusCode(c codes.Code) uint64 {
	switch c {
	case codes.Ok:
		return 1
	case codes.Error:
		return 2
	}
	return 0
}

// keyValues writes attributes as repeated KeyValue field.
func keyValues(m *pb, field int, kvs []attribute.KeyValue) {
	for _, kv := range kvs {
		m.msg(field, func(p *pb) {
			p.str(1, string(kv.Key))
			p.msg(2, func(v *pb) { anyValue(v, kv.Value) })
		})
	}
}

// anyValue writes an AnyValue.
func anyValue(m *pb, v attribute.Value) {
	array := func(n int, each func(*pb, int)) {
		m.msg(5, func(a *pb) {
			for i := 0; i < n; i++ {
				a.msg(1, func(e *pb) { each(e, i) })
			}
		})
	}
	switch v.Type() {
	case attribute.BOOL:
		b := uint64(0)
		if v.AsBool() {
			b = 1
		}
		m.varint(2, b)
	case attribute.INT64:
		m.varint(3, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		m.tag(4, wireFixed64)
		*m = binary.LittleEndian.AppendUint64(*m, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		m.bytes(1, []byte(v.AsString()))
	case attribute.BYTESLICE:
		m.bytes(7, v.AsByteSlice())
	case attribute.BOOLSLICE:
		s := v.AsBoolSlice()
		array(len(s), func(e *pb, i int) { anyValue(e, attribute.BoolValue(s[i])) })
	case attribute.INT64SLICE:
		s := v.AsInt64Slice()
		array(len(s), func(e *pb, i int) { anyValue(e, attribute.Int64Value(s[i])) })
	case attribute.FLOAT64SLICE:
		s := v.AsFloat64Slice()
		array(len(s), func(e *pb, i int) { anyValue(e, attribute.Float64Value(s[i])) })
	case attribute.STRINGSLICE:
		s := v.AsStringSlice()
		array(len(s), func(e *pb, i int) { anyValue(e, attribute.StringValue(s[i])) })
	case attribute.SLICE:
		s := v.AsSlice()
		array(len(s), func(e *pb, i int) { anyValue(e, s[i]) })
	case attribute.MAP:
		kvs := v.AsMap()
		m.msg(6, func(l *pb) { keyValues(l, 1, kvs) })
	}
	// EMPTY: an AnyValue with no value set.
}
