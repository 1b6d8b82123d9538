package audit

import (
	"bufio"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Problem is the first thing wrong with a log: where, and what.
type Problem struct {
	File string
	Line int
	What string
}

func (p *Problem) Error() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.What) }

// Summary is what a verification saw.
type Summary struct {
	Records     int64
	Checkpoints int
	// Signed counts the checkpoints whose signature was checked.
	Signed int
	// Head is the last record of the chain.
	Head *Record
	// Incomplete describes an incomplete last line (a write cut off by a
	// crash), which is not part of the chain; empty when there is none.
	Incomplete string
	// From is the chain's first record when the files before it were
	// removed by a retention that the chain records (RetainedBy, the seq
	// of its record); 0 when the chain starts at record 1.
	From, RetainedBy int64
}

// Verify checks files (oldest first) as one chain: every record's hash,
// its place (seq) and its link to the one before. With pub, every
// checkpoint's signature is checked too; head, the latest checkpoint kept
// apart from the log, shows a log cut before it. The first problem is
// returned as a *Problem error.
func Verify(files []string, pub ed25519.PublicKey, head *Checkpoint) (Summary, error) {
	var s Summary
	type placed struct {
		r    *Record
		file string
		line int
	}
	// Read it all first: a record out of place is told apart from a
	// missing one by looking ahead.
	var all []placed
	for fi, file := range files {
		f, err := os.Open(file)
		if err != nil {
			return s, err
		}
		br := bufio.NewReaderSize(f, 1<<20)
		for n := 1; ; n++ {
			line, err := br.ReadBytes('\n')
			if err == io.EOF {
				if len(line) > 0 {
					if fi != len(files)-1 {
						f.Close()
						return s, &Problem{file, n, "an incomplete line in the middle of the log"}
					}
					s.Incomplete = fmt.Sprintf("%s:%d: an incomplete last line of %d bytes (a write cut off); it is not part of the chain", file, n, len(line))
				}
				break
			}
			if err != nil {
				f.Close()
				return s, err
			}
			r, err := decode(line[:len(line)-1])
			if err != nil {
				f.Close()
				if errors.Is(err, errHash) {
					return s, &Problem{file, n, fmt.Sprintf("edited: record %d's content does not match its hash", r.Seq)}
				}
				return s, &Problem{file, n, err.Error()}
			}
			all = append(all, placed{r, file, n})
		}
		f.Close()
	}
	later := map[int64]bool{}
	removed := map[string]removal{}
	for _, p := range all {
		later[p.r.Seq] = true
		if p.r.Type == RetentionType {
			for _, f := range removedFiles(p.r) {
				removed[f.LastHash] = removal{f.LastSeq, p.r.Seq}
			}
		}
	}
	prev := &Record{}
	if len(all) > 0 {
		// A chain may start after files a retention removed, when one of
		// its own records names the record before its first.
		first := all[0].r
		if rm, ok := removed[first.Prev]; ok && first.Seq > 1 && rm.lastSeq == first.Seq-1 {
			prev = &Record{Seq: rm.lastSeq, Hash: first.Prev}
			s.From, s.RetainedBy = first.Seq, rm.by
		}
	}
	seen := map[int64]string{}
	for _, p := range all {
		r := p.r
		if want := prev.Seq + 1; r.Seq > want && prev.Seq > 0 && later[want] && seen[want] == "" {
			return s, &Problem{p.file, p.line, fmt.Sprintf("reordered: record %d comes before record %d", r.Seq, want)}
		}
		if what := link(prev, r); what != "" {
			return s, &Problem{p.file, p.line, what}
		}
		if r.Type == "checkpoint" {
			if what := checkCheckpoint(r, prev, pub, &s); what != "" {
				return s, &Problem{p.file, p.line, what}
			}
		}
		s.Records++
		seen[r.Seq] = r.Hash
		prev = r
	}
	if prev.Seq > 0 {
		s.Head = prev
	}
	if head != nil {
		where, line := files[len(files)-1], 0
		if len(all) > 0 {
			where, line = all[len(all)-1].file, all[len(all)-1].line
		}
		if pub != nil {
			if err := head.Verify(pub); err != nil {
				return s, &Problem{HeadPath(files[len(files)-1]), 1, "the latest checkpoint: " + err.Error()}
			}
		}
		switch h, ok := seen[head.Seq]; {
		case !ok || prev.Seq <= head.Seq:
			return s, &Problem{where, line, fmt.Sprintf("truncated: the log ends at record %d, before the checkpoint signed over record %d", prev.Seq, head.Seq)}
		case h != head.Hash:
			return s, &Problem{where, line, fmt.Sprintf("record %d was rewritten after the checkpoint signed over it", head.Seq)}
		}
	}
	return s, nil
}

// removal is a removed file's last record, and the retention record that
// names it.
type removal struct{ lastSeq, by int64 }

// removedFiles reads the files a retention record names.
func removedFiles(r *Record) []RemovedFile {
	b, _ := json.Marshal(r.Data)
	var d struct {
		Removed []RemovedFile `json:"removed"`
	}
	json.Unmarshal(b, &d)
	return d.Removed
}

// link says what is wrong with r following prev, or "".
func link(prev, r *Record) string {
	want := prev.Seq + 1
	switch {
	case r.Seq == want && r.Prev == prev.Hash:
		return ""
	case prev.Seq == 0 && r.Seq > 1:
		return fmt.Sprintf("removed: the chain starts at record %d; records 1 to %d are missing (or their files were not given)", r.Seq, r.Seq-1)
	case r.Seq == want:
		return fmt.Sprintf("the record before record %d is not the one it was chained to (replaced)", r.Seq)
	case r.Seq > want:
		return fmt.Sprintf("removed: records %d to %d are missing", want, r.Seq-1)
	}
	return fmt.Sprintf("reordered: record %d comes after record %d", r.Seq, prev.Seq)
}

// checkCheckpoint checks a checkpoint record: it must cover the record
// before it and, with pub, carry a good signature.
func checkCheckpoint(r, prev *Record, pub ed25519.PublicKey, s *Summary) string {
	s.Checkpoints++
	b, _ := json.Marshal(r.Data)
	var c Checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return "a checkpoint that cannot be read: " + err.Error()
	}
	if c.Seq != prev.Seq || c.Hash != prev.Hash {
		return fmt.Sprintf("checkpoint %d covers record %d, not the one before it", r.Seq, c.Seq)
	}
	if pub != nil {
		if err := c.Verify(pub); err != nil {
			return fmt.Sprintf("checkpoint %d: %v", r.Seq, err)
		}
		s.Signed++
	}
	return ""
}
