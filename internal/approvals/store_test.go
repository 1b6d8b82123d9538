package approvals

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func request() Request {
	return Request{Tool: "bank__pay", Args: []byte(`{"amount":500}`), Class: "financial", Rule: "approval.classes", Agent: "payer", Expires: time.Now().Add(time.Hour)}
}

func TestDecidedOnceClaimedOnce(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.Add(request())
	if err != nil {
		t.Fatal(err)
	}
	if it, _ := s.Get(id); it.State != Pending {
		t.Fatalf("new request is %s", it.State)
	}
	if _, err := s.Decide(id, true, "", "ok", ""); err == nil {
		t.Error("a decision without an approver's name was taken")
	}
	// Another process opening the store sees the same request.
	s2, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	it, err := s2.Decide(id, true, "alice", "expected invoice", ScopeCall)
	if err != nil || it.State != Approved || it.By != "alice" {
		t.Fatalf("decide: %+v %v", it, err)
	}
	if _, err := s.Decide(id, false, "bob", "no", ScopeCall); !errors.Is(err, ErrDecided) {
		t.Errorf("second decision: %v, want ErrDecided", err)
	}
	// Many claimers, one winner.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.Claim(id)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d claims succeeded, want 1", wins)
	}
	if err := s.Finish(id, "ok"); err != nil {
		t.Fatal(err)
	}
	if it, _ := s.Get(id); it.State != Done || it.Result != "ok" {
		t.Errorf("after finishing: %+v", it)
	}
}

func TestExpiry(t *testing.T) {
	now := time.Now()
	s, _ := Open(t.TempDir(), func() time.Time { return now })
	r := request()
	r.Expires = now.Add(time.Minute)
	id, _ := s.Add(r)
	now = now.Add(2 * time.Minute)
	if it, _ := s.Get(id); it.State != Expired {
		t.Errorf("past its time: %s", it.State)
	}
	if _, err := s.Decide(id, true, "alice", "late", ScopeCall); !errors.Is(err, ErrDecided) {
		t.Errorf("approving an expired request: %v", err)
	}
	if ok, _ := s.Claim(id); ok {
		t.Error("an expired request was claimed")
	}
}

func TestApproversAndWait(t *testing.T) {
	s, _ := Open(t.TempDir(), nil)
	r := request()
	r.Approvers = []string{"alice"}
	id, _ := s.Add(r)
	if _, err := s.Decide(id, true, "mallory", "", ScopeCall); err == nil || !strings.Contains(err.Error(), "not an approver") {
		t.Errorf("decision by a non-approver: %v", err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		s.Decide(id, false, "alice", "not this month", ScopeCall)
	}()
	it, err := s.Wait(context.Background(), id, 10*time.Millisecond)
	if err != nil || it.State != Denied || it.Why != "not this month" {
		t.Errorf("wait: %+v %v", it, err)
	}
}

func TestDamagedJournalFailsClosed(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir, nil)
	id, _ := s.Add(request())
	f, _ := os.OpenFile(s.Name(), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("{not json\n")
	f.Close()
	if _, err := s.Decide(id, true, "alice", "", ScopeCall); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("decision on a damaged journal: %v", err)
	}
	if _, err := Open(dir, nil); err == nil {
		t.Error("a damaged journal opened")
	}
	if ok, _ := s.Claim(id); ok {
		t.Error("claimed from a damaged journal")
	}
}
