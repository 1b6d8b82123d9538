// Package audit keeps cordon's tamper-evident log of what each agent saw and
// what it did: append-only JSON Lines written by the supervisor, outside the
// sandbox, every record carrying the hash of the one before it (one chain
// per log, continuing across rotated files), made durable before a run is
// reported, safe for many cordon processes appending at once, and, with a
// key, signed checkpoints over the chain's head so that a cut tail shows.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Kind says which side of the agent an event is on.
type Kind string

// Kinds of event.
const (
	// Action is what the agent decided to do: a command, later a tool call.
	Action Kind = "action"
	// Input is what the agent was, or will be, shown: a command's output.
	Input Kind = "input"
	// Decision is what cordon allowed, denied or concluded.
	Decision Kind = "decision"
)

// Event is one thing that happened in a sandbox's life.
type Event struct {
	Time time.Time `json:"time"`
	// Sandbox identifies the sandbox (one run); empty for the log's own
	// records (checkpoints, recoveries).
	Sandbox string `json:"sandbox,omitempty"`
	Agent   string `json:"agent,omitempty"`
	Kind    Kind   `json:"kind"`
	// Type is what happened: start, exec, network, limit, outcome, result,
	// checkpoint, recovered.
	Type string `json:"type"`
	Data any    `json:"data,omitempty"`
}

// Record is an event in the chain.
type Record struct {
	Seq  int64  `json:"seq"`
	Prev string `json:"prev"`
	Event
	// Hash is the SHA-256 of the record's line without it (see encode).
	Hash string `json:"-"`
}

// hashSuffix is how every line ends: the record's hash, last.
const (
	hashKey = `,"hash":"`
	hashLen = 64
)

// encode writes r as one line: the JSON of the record without its hash,
// with the hash of exactly those bytes appended as the last member. The
// hash covers seq and prev, so that a record can be neither edited, moved
// nor dropped without the chain showing it.
func encode(r *Record) ([]byte, error) {
	body, err := json.Marshal(r.Event)
	if err != nil {
		return nil, err
	}
	var line []byte
	line, r.Hash = chainLine(r.Seq, r.Prev, body)
	return line, nil
}

// chainLine returns the line of the record with seq and prev whose event
// encodes as body (an Event's JSON, which always starts with its time),
// and the record's hash: the same bytes as encoding the whole record, so
// that events can be encoded before their place in the chain is known.
func chainLine(seq int64, prev string, body []byte) ([]byte, string) {
	line := make([]byte, 0, len(body)+len(prev)+len(hashKey)+hashLen+40)
	line = append(line, `{"seq":`...)
	line = strconv.AppendInt(line, seq, 10)
	line = append(line, `,"prev":`...)
	line = strconv.AppendQuote(line, prev)
	line = append(line, ',')
	line = append(line, body[1:]...)
	sum := sha256.Sum256(line)
	hash := hex.EncodeToString(sum[:])
	line = append(line[:len(line)-1], hashKey...)
	line = append(line, hash...)
	line = append(line, '"', '}', '\n')
	return line, hash
}

// errHash means a line's content does not match its hash.
var errHash = errors.New("its content does not match its hash")

// decode reads one line (without its newline) and checks its hash.
func decode(line []byte) (*Record, error) {
	i := bytes.LastIndex(line, []byte(hashKey))
	if i < 0 || len(line) != i+len(hashKey)+hashLen+2 || !bytes.HasSuffix(line, []byte(`"}`)) {
		return nil, fmt.Errorf("not a record (no hash at its end)")
	}
	body := append(append([]byte{}, line[:i]...), '}')
	want := string(line[i+len(hashKey) : i+len(hashKey)+hashLen])
	var r Record
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("not a record: %v", err)
	}
	sum := sha256.Sum256(body)
	r.Hash = want
	if hex.EncodeToString(sum[:]) != want {
		return &r, errHash
	}
	return &r, nil
}
