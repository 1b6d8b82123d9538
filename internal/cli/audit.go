package cli

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cordon-sandbox/cordon/internal/audit"
	"github.com/cordon-sandbox/cordon/internal/config"
	"github.com/cordon-sandbox/cordon/internal/termsafe"
)

// The subcommands of `cordon audit verify|show|keygen` (see commands.go).

// auditVerifyFlags registers cordon audit verify's flags.
func auditVerifyFlags(f *flag.FlagSet) (keyFile, logFlag *string) {
	keyFile = f.String("key", "", "check checkpoint signatures with the public key in `PUB` (default: the configured key's .pub)")
	logFlag = f.String("log", "", "verify the log at `FILE` and its rotated files (default: the configured log)")
	return keyFile, logFlag
}

// auditShowFlags registers cordon audit show's flags.
func auditShowFlags(f *flag.FlagSet) (sandboxID, kind, since *string, asJSON *bool, logFlag *string) {
	sandboxID = f.String("sandbox", "", "only the run `ID` (an outcome's sandbox)")
	kind = f.String("kind", "", "only events of `KIND`: action, input or decision")
	since = f.String("since", "", "only events since `T` (RFC 3339 time, or a duration back from now: 1h)")
	asJSON = f.Bool("json", false, "print the events as JSON Lines")
	logFlag = f.String("log", "", "read the log at `FILE` (default: the configured log)")
	return sandboxID, kind, since, asJSON, logFlag
}

// auditKeygenFlags registers cordon audit keygen's flags.
func auditKeygenFlags(f *flag.FlagSet) (out *string) {
	def := filepath.Join(filepath.Dir(config.Path()), "audit.key")
	return f.String("out", def, "write the private key to `FILE` and the public key to FILE.pub")
}

// auditFiles returns the files to read: those given, else the configured
// log's, oldest first, and the log's own path (for its head).
func auditFiles(files []string, logFlag string) ([]string, string, *config.Config, error) {
	cfg, err := config.Load()
	if err != nil {
		return nil, "", nil, err
	}
	if len(files) > 0 {
		return files, files[len(files)-1], cfg, nil
	}
	path := cfg.Audit.Log
	if logFlag != "" {
		path = logFlag
	}
	all := audit.Files(path)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		all = all[:len(all)-1]
	}
	if len(all) == 0 {
		return nil, "", nil, fmt.Errorf("no audit log at %s", path)
	}
	return all, path, cfg, nil
}

func auditVerify(e *env, args []string) int {
	f := newFlags(e, "audit verify", "audit verify [--key PUB] [--log FILE] [FILES...]")
	keyFile, logFlag := auditVerifyFlags(f)
	operands, err := parseAnywhere(f, args)
	if err != nil {
		return fail(e, err)
	}
	files, current, cfg, err := auditFiles(operands, *logFlag)
	if err != nil {
		return fail(e, err)
	}
	var pub ed25519.PublicKey
	switch {
	case *keyFile != "":
		if pub, err = audit.LoadPublicKey(*keyFile); err != nil {
			return fail(e, err)
		}
	case cfg.Audit.Key != "":
		if p, err := audit.LoadPublicKey(cfg.Audit.Key + ".pub"); err == nil {
			pub = p
		}
	}
	head, err := audit.ReadHead(current)
	if err != nil {
		return fail(e, err)
	}
	s, err := audit.Verify(files, pub, head)
	var p *audit.Problem
	if errors.As(err, &p) {
		fmt.Fprintf(e.stderr, "cordon: audit verify: FAILED: %s\n", p)
		return 1
	}
	if err != nil {
		return fail(e, err)
	}
	headText := "empty"
	if s.Head != nil {
		headText = fmt.Sprintf("last record %d (%s)", s.Head.Seq, s.Head.Hash[:16])
	}
	fmt.Fprintf(e.stdout, "ok: %d records in %d files, %s; %d checkpoints, %d signatures checked\n", s.Records, len(files), headText, s.Checkpoints, s.Signed)
	if s.From > 0 {
		fmt.Fprintf(e.stdout, "note: the chain starts at record %d: records 1 to %d were removed by the retention that record %d names\n", s.From, s.From-1, s.RetainedBy)
	}
	if head != nil && pub == nil {
		fmt.Fprintln(e.stdout, "note: checkpoints were not checked: no public key (--key)")
	}
	if s.Incomplete != "" {
		fmt.Fprintf(e.stdout, "note: %s\n", s.Incomplete)
	}
	return 0
}

// shown is a record as show reads it: possibly damaged, never dropped.
type shown struct {
	Seq     int64          `json:"seq"`
	Time    time.Time      `json:"time"`
	Sandbox string         `json:"sandbox,omitempty"`
	Agent   string         `json:"agent,omitempty"`
	Kind    string         `json:"kind"`
	Type    string         `json:"type"`
	Data    map[string]any `json:"data,omitempty"`
}

func auditShow(e *env, args []string) int {
	f := newFlags(e, "audit show", "audit show [--sandbox ID] [--kind K] [--since T] [--json] [--log FILE]")
	sandboxID, kind, since, asJSON, logFlag := auditShowFlags(f)
	operands, err := parseAnywhere(f, args)
	if err != nil {
		return fail(e, err)
	}
	if *kind != "" && *kind != "action" && *kind != "input" && *kind != "decision" {
		return fail(e, fmt.Errorf("--kind: %q is not action, input or decision", *kind))
	}
	var from time.Time
	if *since != "" {
		if d, err := time.ParseDuration(*since); err == nil {
			from = time.Now().Add(-d)
		} else if from, err = time.Parse(time.RFC3339, *since); err != nil {
			return fail(e, fmt.Errorf("--since: %q is neither an RFC 3339 time nor a duration", *since))
		}
	}
	files, _, _, err := auditFiles(operands, *logFlag)
	if err != nil {
		return fail(e, err)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	if !*asJSON {
		fmt.Fprintln(tw, "TIME\tSANDBOX\tKIND\tTYPE\tWHAT")
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return fail(e, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var r shown
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				continue // damaged; cordon audit verify says where
			}
			if (*sandboxID != "" && r.Sandbox != *sandboxID) || (*kind != "" && r.Kind != *kind) || r.Time.Before(from) {
				continue
			}
			if *asJSON {
				// What a terminal would obey or reorder (control
				// characters, bidirectional controls) as \u escapes:
				// the same JSON.
				b, _ := json.Marshal(r)
				e.stdout.Write(append(termsafe.JSON(b), '\n'))
				continue
			}
			id := termsafe.Line(r.Sandbox)
			if id == "" {
				id = "-"
			}
			// What a record describes is an agent's: escaped, on one line.
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Time.Local().Format("2006-01-02 15:04:05.000"), id, termsafe.Line(string(r.Kind)), termsafe.Line(r.Type), termsafe.Line(describe(r)))
		}
	}
	tw.Flush()
	return 0
}

// describe says in one line what an event was.
func describe(r shown) string {
	d := r.Data
	str := func(k string) string { return fmt.Sprint(d[k]) }
	switch r.Type {
	case "start":
		return fmt.Sprintf("agent %s, profile %s (%.12s), limits %s", r.Agent, str("profile"), str("profile_sha256"), limitsText(d["limits"]))
	case "exec":
		return fmt.Sprintf("ran %s in %s", argvText(d["argv"]), str("cwd"))
	case "network":
		return fmt.Sprintf("%s %s %s:%v: %s (out %v, in %v bytes)", str("decision"), str("protocol"), str("host"), d["port"], str("reason"), d["bytes_out"], d["bytes_in"])
	case audit.RepeatedType:
		same, _ := d["same"].(map[string]any)
		what := fmt.Sprint(same)
		if str("of") == "network" {
			what = fmt.Sprintf("%v %v %v:%v: %v", same["decision"], same["protocol"], same["host"], same["port"], same["reason"])
		}
		return fmt.Sprintf("%v more %s: %s, from %s to %s", d["count"], str("of"), what, str("first"), str("last"))
	case audit.BudgetType:
		if u, ok := d["unrecorded"]; ok {
			return fmt.Sprintf("the run's budget of %v records left unrecorded, only counted: %v", d["records"], u)
		}
		return fmt.Sprintf("the run reached its budget of %v records: further ones are counted only", d["records"])
	case "limit":
		return fmt.Sprintf("stopped at the %s limit (%s)", str("name"), str("value"))
	case "outcome":
		return fmt.Sprintf("%s, exit %v: %s", str("status"), d["exit_code"], str("message"))
	case "result":
		head := str("head")
		if _, ok := d["head"]; !ok {
			head = "(binary)"
		}
		if len(head) > 60 {
			head = head[:60] + "..."
		}
		return fmt.Sprintf("%s: %v bytes, sha256 %.16s, starts %q", str("stream"), d["bytes"], str("sha256"), head)
	case "checkpoint":
		return fmt.Sprintf("signed the chain's head (record %v) with key %s", d["seq"], str("key_id"))
	case "recovered":
		return fmt.Sprintf("%s (%v bytes)", str("reason"), d["dropped_bytes"])
	}
	b, _ := json.Marshal(d)
	return string(b)
}

func argvText(v any) string {
	args, _ := v.([]any)
	var out []string
	for _, a := range args {
		s := fmt.Sprint(a)
		if strings.ContainsAny(s, " \t'\"") || s == "" {
			s = "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func limitsText(v any) string {
	m, _ := v.(map[string]any)
	var out []string
	for _, k := range []string{"wall", "memory", "pids", "cpu_time", "output"} {
		if x, ok := m[k]; ok {
			out = append(out, fmt.Sprintf("%s=%v", k, x))
		}
	}
	return strings.Join(out, " ")
}

func auditKeygen(e *env, args []string) int {
	f := newFlags(e, "audit keygen", "audit keygen [--out FILE]")
	out := auditKeygenFlags(f)
	if _, err := parseAnywhere(f, args); err != nil {
		return fail(e, err)
	}
	if _, err := os.Stat(*out); err == nil {
		return fail(e, fmt.Errorf("%s exists; cordon never replaces a signing key (remove it first, or choose --out)", *out))
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o700); err != nil {
		return fail(e, err)
	}
	pub, err := audit.GenerateKey(*out)
	if err != nil {
		return fail(e, err)
	}
	fmt.Fprintf(e.stdout, "wrote %s (private, 0600) and %s.pub (key %s)\n", *out, *out, audit.KeyID(pub))
	fmt.Fprintf(e.stdout, "sign the audit log with it: audit.key: %s in %s, or CORDON_AUDIT_KEY=%s\n", *out, config.Path(), *out)
	return 0
}
