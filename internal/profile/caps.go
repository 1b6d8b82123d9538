package profile

// The bounds of what one tool call carries, when the profile sets none.
const (
	DefaultMaxArgumentBytes = 1 << 20
	DefaultMaxResultBytes   = 4 << 20
	// The largest bounds a profile may set: a call's arguments and its
	// result are held whole in the gateway's memory.
	maxArgumentCap = 64 << 20
	maxResultCap   = 256 << 20
	// minCap keeps room for the smallest useful call and result.
	minCap = 1 << 10
)

// ArgumentCap is the largest size, in bytes, of a tool call's arguments
// (their JSON): a call with more is refused before it is decided.
func (p *Profile) ArgumentCap() int64 {
	if p.Session != nil && p.Session.MaxArgumentBytes != "" {
		if n, err := ParseSize(p.Session.MaxArgumentBytes); err == nil {
			return n
		}
	}
	return DefaultMaxArgumentBytes
}

// ResultCap is the largest size, in bytes, of a tool's result (its content
// as JSON) that the agent is shown: a larger one is cut at the cap.
func (p *Profile) ResultCap() int64 {
	if p.Session != nil && p.Session.MaxResultBytes != "" {
		if n, err := ParseSize(p.Session.MaxResultBytes); err == nil {
			return n
		}
	}
	return DefaultMaxResultBytes
}

// validateCaps checks the sizes under session.
func (p *Profile) validateCaps(bad func(field, format string, args ...any)) {
	s := p.Session
	if s == nil {
		return
	}
	for _, c := range []struct {
		field, value string
		max          int64
	}{
		{"session.max_argument_bytes", s.MaxArgumentBytes, maxArgumentCap},
		{"session.max_result_bytes", s.MaxResultBytes, maxResultCap},
	} {
		if c.value == "" {
			continue
		}
		n, err := ParseSize(c.value)
		switch {
		case err != nil:
			bad(c.field, "%v", err)
		case n < minCap:
			bad(c.field, "%s is below the smallest bound, %s", c.value, FormatSize(minCap))
		case n > c.max:
			bad(c.field, "%s is above the largest bound, %s (the gateway holds it whole in memory)", c.value, FormatSize(c.max))
		}
	}
}
