package audit

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
)

type dest struct {
	Host     string `json:"host"`
	Decision string `json:"decision"`
}

// fold adds n identical network decisions, 1ms apart, and returns the
// log's records once the folder is closed; they verify as a chain.
func foldRun(t *testing.T, n, budget int, same func(i int) dest) []Record {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, _ := Open(path, Options{})
	f := NewFolder(l, FoldEvery, budget)
	start := time.Now().UTC()
	for i := range n {
		d := same(i)
		f.Add(Event{Time: start.Add(time.Duration(i) * time.Millisecond), Sandbox: "sb", Kind: Decision, Type: "network", Data: d}, d)
	}
	f.Close()
	if err := l.Seal(); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(Files(path), nil, nil); err != nil {
		t.Fatal(err)
	}
	var rs []Record
	for _, line := range lines(t, path) {
		r, err := decode(line[:len(line)-1])
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, *r)
	}
	return rs
}

// counts returns how many events the records stand for: one per full
// record, Count per repeated one, and what the budget left unrecorded.
func counts(t *testing.T, rs []Record) (full, repeated, unrecorded int) {
	for _, r := range rs {
		b, _ := json.Marshal(r.Data)
		switch r.Type {
		case "network":
			full++
		case RepeatedType:
			var x Repeated
			json.Unmarshal(b, &x)
			if x.Of != "network" || x.Count < 1 || x.Last.Before(x.First) {
				t.Errorf("repeated record %s", b)
			}
			repeated += x.Count
		case BudgetType:
			var x Budget
			json.Unmarshal(b, &x)
			unrecorded += x.Unrecorded["network"]
		}
	}
	return full, repeated, unrecorded
}

// 10,000 identical decisions over 10 seconds are a handful of records,
// whose counts add up to 10,000.
func TestFoldRepeats(t *testing.T) {
	rs := foldRun(t, 10000, RunRecords, func(int) dest { return dest{"api.example.com:443", "allow"} })
	full, repeated, unrecorded := counts(t, rs)
	if full+repeated+unrecorded != 10000 {
		t.Errorf("%d full + %d repeated + %d unrecorded", full, repeated, unrecorded)
	}
	// One interval a second (the folder's own ticks may end some early).
	if len(rs) > 30 || full < 1 {
		t.Errorf("%d records, %d in full", len(rs), full)
	}
}

// Distinct decisions past the budget are counted, not recorded: one
// record says the budget was reached, one at the end how many it left.
func TestFoldBudget(t *testing.T) {
	rs := foldRun(t, 10000, 100, func(i int) dest { return dest{"h" + string(rune('a'+i%26)) + time.Duration(i).String(), "deny"} })
	full, repeated, unrecorded := counts(t, rs)
	if full+repeated+unrecorded != 10000 || full != 100 {
		t.Errorf("%d full + %d repeated + %d unrecorded", full, repeated, unrecorded)
	}
	budgets := 0
	for _, r := range rs {
		if r.Type == BudgetType {
			budgets++
		}
	}
	if len(rs) != 102 || budgets != 2 {
		t.Errorf("%d records, %d of the budget", len(rs), budgets)
	}
}
