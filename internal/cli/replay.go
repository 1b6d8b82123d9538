package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/profile"
	"github.com/cordon-sandbox/cordon/internal/toolpolicy"
)

// traceLine is one recorded tool call: the call (its resolved files and
// workspace included), whether it failed once it ran, and whether a failed
// call's result was shown to the agent.
type traceLine struct {
	toolpolicy.Call
	Failed bool `json:"failed,omitempty"`
	// Shown says the result of a failed call was shown to the agent (its
	// error, partial output): it brings its labels in as a result does.
	Shown bool `json:"shown,omitempty"`
	// Approved says a person approved the call, had it been held.
	Approved bool `json:"approved,omitempty"`
	// BytesIn is the size of the result the agent was shown.
	BytesIn int `json:"bytes_in,omitempty"`
	// Found are the labels the gateway gave the result for what it held
	// (a credential: secret), as its tool_result event records them.
	Found []string `json:"found,omitempty"`
}

// replayed is one decision as replay prints it with --json.
type replayed struct {
	Step int             `json:"step"`
	Line int             `json:"line"`
	Call toolpolicy.Call `json:"call"`
	toolpolicy.Decision
	Labels   []string `json:"labels,omitempty"`
	Approved bool     `json:"approved,omitempty"`
	// Checkpoints are the trajectory rules that held after this call.
	Checkpoints []toolpolicy.Checkpoint `json:"checkpoints,omitempty"`
}

// replayCmd implements `cordon replay TRACE.jsonl --profile FILE`: it feeds
// a recorded sequence of tool calls through the profile's tool policy, as
// one session, without any model, and prints each decision. Exit status 1
// when a call was refused, 0 when every call was allowed.
func replayCmd(e *env, args []string) int {
	fs := newFlags(e, "replay", "replay [--json] --profile FILE TRACE.jsonl")
	file, asJSON := replayFlags(fs)
	operands, err := parseAnywhere(fs, args)
	if err != nil {
		return fail(e, err)
	}
	if len(operands) != 1 || *file == "" {
		fs.Usage()
		return fail(e, fmt.Errorf("replay: name a profile (--profile FILE) and one trace file"))
	}
	p, err := profile.LoadFile(*file)
	if err != nil {
		return fail(e, err)
	}
	calls, lines, err := readTrace(operands[0])
	if err != nil {
		return fail(e, err)
	}
	s := toolpolicy.NewSession(p, nil)
	refused := false
	for i, c := range calls {
		d := s.Decide(c.Call)
		r := replayed{Step: s.Steps(), Line: lines[i], Call: c.Call, Decision: d}
		if d.Approval && c.Approved {
			// The trace says a person approved it.
			s.Commit(c.Call)
			r.Approved = true
		}
		if d.Allow || r.Approved {
			shown := !c.Failed || c.Shown
			s.Record(s.Steps(), c.Call, c.Failed, shown)
			s.Received(c.BytesIn)
			if shown {
				s.AddLabels(s.Steps(), c.Call, c.Found)
				r.Labels = s.ResultLabels(c.Call)
				r.Labels = append(r.Labels, c.Found...)
			}
		} else if !r.Approved {
			refused = true
			if d.Approval {
				s.ApprovalRefused()
			}
		}
		r.Checkpoints = s.TakeCheckpoints()
		for _, cp := range r.Checkpoints {
			if cp.Action != "warn" {
				refused = true
			}
		}
		if *asJSON {
			b, _ := json.Marshal(r)
			fmt.Fprintln(e.stdout, string(b))
			continue
		}
		printDecision(e, r)
	}
	if refused {
		return 1
	}
	return 0
}

func printDecision(e *env, r replayed) {
	verdict := "allow"
	switch {
	case r.Approved:
		verdict = "apprv"
	case r.Approval:
		verdict = "hold "
	case !r.Allow:
		verdict = "deny "
	}
	args, _ := json.Marshal(r.Call.Args)
	if len(r.Call.Args) == 0 {
		args = nil
	}
	fmt.Fprintf(e.stdout, "%3d  %s  %s %s\n", r.Step, verdict, r.Call.Tool, args)
	fmt.Fprintf(e.stdout, "     %s: %s\n", r.Rule, r.Reason)
	if r.Hint != "" {
		fmt.Fprintf(e.stdout, "     %s\n", r.Hint)
	}
	if len(r.Labels) > 0 {
		fmt.Fprintf(e.stdout, "     brings in: %s\n", strings.Join(r.Labels, ", "))
	}
	for _, cp := range r.Checkpoints {
		fmt.Fprintf(e.stdout, "     checkpoint: %s (%s): %s\n", cp.Rule, cp.Action, cp.Reason)
	}
}

// readTrace reads a JSON Lines trace of tool calls, skipping blank lines;
// a line that is not a call is an error naming the line.
func readTrace(path string) ([]traceLine, []int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading trace: %w", err)
	}
	defer f.Close()
	var calls []traceLine
	var lines []int
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var c traceLine
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.DisallowUnknownFields()
		dec.UseNumber() // integral arguments are ints to constraints
		if err := dec.Decode(&c); err != nil {
			return nil, nil, fmt.Errorf("%s:%d: not a tool call (%v); want {\"tool\": NAME, \"args\": {...}, \"failed\": false}", path, n, err)
		}
		if c.Tool == "" {
			return nil, nil, fmt.Errorf("%s:%d: tool: missing", path, n)
		}
		calls = append(calls, c)
		lines = append(lines, n)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("reading trace: %w", err)
	}
	return calls, lines, nil
}

// replayFlags registers cordon replay's flags.
func replayFlags(fs *flag.FlagSet) (file *string, asJSON *bool) {
	file = fs.String("profile", "", "the profile `FILE` whose tool policy decides")
	asJSON = fs.Bool("json", false, "print each decision as a JSON line")
	return file, asJSON
}
