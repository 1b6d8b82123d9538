package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/secretscan"
	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
)

// What the audit log keeps of a call's arguments and of a result: never a
// credential, never more than a bounded preview. The whole value is known
// by its size and its SHA-256.
//
// Arguments are kept as their JSON, each string cut to leafBytes and the
// whole to previewBytes; a string in which the scanner finds a credential
// has it replaced by a mark, and while the session carries the secret
// label every string is so replaced (the agent may pass on what it read);
// member names, numbers and booleans stay, unless a name holds a
// credential.
// A result keeps a preview of its first previewBytes unless it is labelled
// secret, holds a credential, or was shown to a session that carries
// secret: then only its size, digest and why.

// secretLabel is the label whose values the audit log never keeps.
const secretLabel = "secret"

// leafBytes is how much of one string of the arguments the log keeps;
// scanMargin how far past it the scanner looks.
const (
	leafBytes  = 256
	scanMargin = 1024
)

// digest is the SHA-256 of b, in hex.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// withArgs sets in data what the audit log keeps of the arguments raw of a
// call made while the session carried secret (or not): args, a bounded
// copy, and args_bytes and args_sha256, of the whole; args_redacted says
// why strings were replaced, args_cut that some were cut.
func withArgs(data map[string]any, raw json.RawMessage, secret bool) map[string]any {
	data["args_bytes"] = len(raw)
	data["args_sha256"] = digest(raw)
	r := redactor{secret: secret, budget: previewBytes}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		data["args"] = r.text(string(raw))
	} else {
		data["args"] = r.value(v, 0)
	}
	switch {
	case secret:
		data["args_redacted"] = "the session carries " + secretLabel
	case len(r.found) > 0:
		data["args_redacted"] = "credential (" + strings.Join(slices.Sorted(maps.Keys(r.found)), ", ") + ")"
	}
	if r.cut {
		data["args_cut"] = true
	}
	return data
}

// redactor makes the bounded, redacted copy of a JSON value.
type redactor struct {
	secret bool
	budget int             // bytes of preview left
	found  map[string]bool // rules of the credentials replaced
	cut    bool
}

// maxDepth bounds the copy's nesting; deeper values are marked.
const maxDepth = 32

func (r *redactor) value(v any, depth int) any {
	if r.budget <= 0 || depth > maxDepth {
		r.cut = true
		return "[cut]"
	}
	switch v := v.(type) {
	case string:
		return r.text(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if r.budget <= 0 {
				r.cut = true
				out["[cut]"] = fmt.Sprintf("%d more keys", len(v)-len(out))
				break
			}
			key := k
			if _, ok := secretscan.Found([]byte(k)); ok || len(k) > leafBytes {
				key = fmt.Sprintf("[key %d: %s]", len(out), r.text(k))
			}
			r.budget -= len(key)
			out[key] = r.value(v[k], depth+1)
		}
		return out
	case []any:
		out := make([]any, 0, min(len(v), 64))
		for i, e := range v {
			if r.budget <= 0 {
				r.cut = true
				out = append(out, fmt.Sprintf("[cut: %d more]", len(v)-i))
				break
			}
			out = append(out, r.value(e, depth+1))
		}
		return out
	case json.Number:
		r.budget -= len(v)
		return v
	default:
		r.budget -= 5
		return v
	}
}

// text is what the log keeps of one string: replaced whole in a secret
// session, its credentials replaced otherwise, cut to leafBytes.
func (r *redactor) text(s string) string {
	if r.secret {
		out := mask(s, "")
		r.budget -= len(out)
		return out
	}
	// Only the start of a string is kept: the scan covers it, and enough
	// past it to see a credential that begins before the cut.
	scanned := s
	if len(scanned) > leafBytes+scanMargin {
		scanned = scanned[:leafBytes+scanMargin]
	}
	s = r.replace(s, secretscan.Scan([]byte(scanned), 0))
	if len(s) > leafBytes {
		r.cut = true
		s = cutUTF8(s, leafBytes) + fmt.Sprintf("…[cut: %d bytes]", len(s))
	}
	r.budget -= len(s)
	return s
}

// replace is s with the credentials fs found in it replaced by marks.
func (r *redactor) replace(s string, fs []secretscan.Finding) string {
	if len(fs) == secretscan.MaxFindings {
		fs = []secretscan.Finding{{Rule: "many", Start: 0, End: len(s)}}
	}
	if len(fs) == 0 {
		return s
	}
	if r.found == nil {
		r.found = map[string]bool{}
	}
	var b strings.Builder
	at := 0
	for _, f := range fs {
		r.found[f.Rule] = true
		b.WriteString(s[at:f.Start])
		b.WriteString(mask(s[f.Start:f.End], f.Rule))
		at = f.End
	}
	b.WriteString(s[at:])
	return b.String()
}

// mask stands for a secret value in the log: its length and, when it is
// long enough that they give little away, its first four characters (a
// key's kind: ghp_, AKIA).
func mask(s, rule string) string {
	what := "redacted"
	if rule != "" {
		what = "redacted " + rule
	}
	if len(s) >= 16 {
		return fmt.Sprintf("[%s: %q…, %d bytes]", what, cutUTF8(s, 4), len(s))
	}
	return fmt.Sprintf("[%s: %d bytes]", what, len(s))
}

// cutUTF8 is at most n bytes of s, not splitting a character, as valid
// UTF-8.
func cutUTF8(s string, n int) string {
	if len(s) > n {
		s = s[:n]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// scanResult returns the rules of the credentials in what a result shows
// (its content as JSON, its structured content, its blobs) and the labels
// they give it.
func scanResult(parts ...[]byte) (rules, labels []string) {
	for _, b := range parts {
		for _, f := range secretscan.Scan(b, 0) {
			if !slices.Contains(rules, f.Rule) {
				rules = append(rules, f.Rule)
			}
		}
	}
	if len(rules) > 0 {
		labels = []string{secretLabel}
	}
	return rules, labels
}

// shownParts is what a result shows the agent, as the scan reads it: the
// text of its items decoded (a JSON encoding would escape "&", "<" and ">"
// and cut a password at the escape), joined so that a credential split
// across items is whole, the strings of its structured content and of its
// _meta, and the decoded bytes of its blobs.
func shownParts(ctr *mcp.CallToolResult) [][]byte {
	var texts []string
	for _, c := range ctr.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			texts = append(texts, c.Text)
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				texts = append(texts, c.Resource.URI, c.Resource.Text)
			}
		case *mcp.ResourceLink:
			texts = append(texts, c.URI, c.Name, c.Title, c.Description)
		}
	}
	parts := [][]byte{
		[]byte(strings.Join(texts, "")),
		[]byte(strings.Join(texts, "\n")),
		jsonStrings(ctr.StructuredContent),
		jsonStrings(ctr.Meta),
	}
	return append(parts, blobs(ctr.Content)...)
}

// jsonStrings is every key and string of v's JSON, decoded, one per line.
func jsonStrings(v any) []byte {
	if v == nil {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return nil
	}
	var out []byte
	dec := json.NewDecoder(&buf)
	for {
		t, err := dec.Token()
		if err != nil {
			return out
		}
		if s, ok := t.(string); ok {
			out = append(append(out, s...), '\n')
		}
	}
}

// blobs are the decoded bytes of a result's binary content, which its JSON
// shows only as base64.
func blobs(content []mcp.Content) [][]byte {
	var out [][]byte
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.ImageContent:
			out = append(out, c.Data)
		case *mcp.AudioContent:
			out = append(out, c.Data)
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				out = append(out, c.Resource.Blob)
			}
		}
	}
	return out
}

// logReason is what the audit log keeps of a decision's reason: the
// values it quotes (an argument's name, a path, as the agent sent them)
// are kept as arguments are, and a credential anywhere in it is replaced.
func logReason(reason string, secret bool) string {
	r := redactor{secret: secret, budget: previewBytes}
	var b strings.Builder
	for {
		i := strings.IndexByte(reason, '"')
		if i < 0 {
			break
		}
		q, err := strconv.QuotedPrefix(reason[i:])
		if err != nil {
			b.WriteString(reason[:i+1])
			reason = reason[i+1:]
			continue
		}
		v, _ := strconv.Unquote(q)
		b.WriteString(reason[:i])
		b.WriteString(strconv.Quote(r.text(v)))
		reason = reason[i+len(q):]
	}
	b.WriteString(reason)
	out := b.String()
	return r.replace(out, secretscan.Scan([]byte(out), 0))
}

// logName is what the audit log keeps of the name of a called tool: a
// tool of the profile, or one a server offers, by its name; any other
// name the agent sent as it keeps arguments.
func (g *Gateway) logName(name string, secret bool) string {
	g.mu.Lock()
	_, served := g.tools[name]
	g.mu.Unlock()
	if _, ok := g.cfg.Profile.Tools[name]; ok || served {
		return name
	}
	r := redactor{secret: secret, budget: previewBytes}
	return r.text(strings.ToValidUTF8(name, "\uFFFD"))
}

// withContent sets in shown what the audit log keeps of a result b: its
// size and digest, and a preview unless it is secret (labelled so, holding
// a credential, or shown to a session that carries secret).
func withContent(shown map[string]any, b []byte, labels, rules []string, secret bool) {
	shown["bytes"] = len(b)
	shown["sha256"] = digest(b)
	switch {
	case len(rules) > 0:
		shown["redacted"] = "credential (" + strings.Join(rules, ", ") + ")"
	case slices.Contains(labels, secretLabel):
		shown["redacted"] = "labelled " + secretLabel
	case secret:
		shown["redacted"] = "the session carries " + secretLabel
	default:
		shown["content"] = preview(b)
	}
}

// carriesSecret says whether the session carries the secret label; s.mu
// is held.
func (s *session) carriesSecret() bool {
	return slices.Contains(s.policy.Labels(), secretLabel)
}

// oversized refuses a call whose arguments are larger than the profile's
// bound, before they are decoded or decided: the audit log keeps their
// size and digest, not their content.
func (g *Gateway) oversized(ctx context.Context, s *session, name string, raw json.RawMessage) (*mcp.CallToolResult, bool) {
	limit := g.cfg.Profile.ArgumentCap()
	if int64(len(raw)) <= limit {
		return nil, false
	}
	d := toolpolicy.Decision{Rule: "session.max_argument_bytes", Limit: "session.max_argument_bytes",
		Reason: fmt.Sprintf("the arguments of %s are %d bytes, more than the profile's bound of %d bytes", name, len(raw), limit),
		Hint:   "pass large data by a file in the workspace, and its path as the argument"}
	traceDecision(ctx, 0, d, nil)
	s.mu.Lock()
	secret := s.carriesSecret()
	s.mu.Unlock()
	// The name is the agent's: kept as its arguments would be.
	logged := g.logName(name, secret)
	data := map[string]any{"tool": logged, "session": s.id, "args_bytes": len(raw), "args_sha256": digest(raw), "args_cut": true}
	reason := strings.Replace(d.Reason, name, logged, 1)
	if err := g.record(s,
		audit.Event{Kind: audit.Action, Type: "tool_call", Data: data},
		audit.Event{Kind: audit.Decision, Type: "tool_decision", Data: map[string]any{"tool": logged, "session": s.id, "allow": false, "rule": d.Rule, "limit": d.Limit, "reason": logReason(reason, secret)}},
	); err != nil {
		d.Reason += fmt.Sprintf("; and the refusal could not be recorded (%v)", err)
	}
	return refusal(d), true
}

// cutResult bounds what a result shows the agent to the profile's
// max_result_bytes: text is cut, other content past the bound dropped, and
// a note says so. A result within the bound is returned as it is.
func (g *Gateway) cutResult(ctr *mcp.CallToolResult, res mcp.Result) (*mcp.CallToolResult, mcp.Result) {
	if ctr == nil {
		return ctr, res
	}
	limit := int(g.cfg.Profile.ResultCap())
	b, err := json.Marshal(ctr.Content)
	size := len(b)
	var sc []byte
	if ctr.StructuredContent != nil {
		sc, _ = json.Marshal(ctr.StructuredContent)
	}
	if err == nil && size+len(sc) <= limit {
		return ctr, res
	}
	out := *ctr
	out.Content = nil
	// The note and JSON's framing take some of the bound.
	left := limit - 512
	if len(sc) > 0 {
		// Structured content cannot be cut and stay valid: it is dropped,
		// and its text form (the content) is cut.
		out.StructuredContent = nil
	}
	for _, c := range ctr.Content {
		cb, _ := json.Marshal(c)
		switch {
		case len(cb) <= left:
			out.Content = append(out.Content, c)
			left -= len(cb)
		case left > 64:
			if t, ok := c.(*mcp.TextContent); ok {
				// Escaping in JSON can double a text's size at most... or
				// grow a control character six times: cut by its JSON size.
				text := cutJSONText(t.Text, left-64)
				out.Content = append(out.Content, &mcp.TextContent{Text: text})
				left = 0
			}
		}
	}
	note := fmt.Sprintf("[cordon cut this result at the profile's bound of %d bytes (session.max_result_bytes); it was %d bytes]", limit, size+len(sc))
	out.Content = append(out.Content, &mcp.TextContent{Text: note})
	return &out, &out
}

// cutJSONText is the longest start of s whose JSON string form (as
// encoding/json writes it) is at most n bytes.
func cutJSONText(s string, n int) string {
	size := 2 // the quotes
	for i, r := range s {
		w := utf8.RuneLen(r)
		switch {
		case r == utf8.RuneError:
			w = 6 // written as \ufffd
		case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
			w = 2
		case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
			w = 6
		}
		if size+w > n {
			return strings.ToValidUTF8(s[:i], "\uFFFD")
		}
		size += w
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// acrossResults returns the rules of the credentials of a known format
// that what s was shown before and text make together (a token printed in
// pieces, result after result), and keeps what may begin one for the next
// (secretscan.Pieces); s.mu is held.
func acrossResults(s *session, text []byte) []string {
	rules, keep := secretscan.Pieces(s.pieces, text)
	s.pieces = keep
	return rules
}
