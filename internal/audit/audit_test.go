package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func ev(i int) Event {
	return Event{Sandbox: "sb", Kind: Action, Type: "exec", Data: map[string]any{"n": i, "argv": []string{"echo", "x"}}}
}

func fill(t *testing.T, l *Log, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		l.Add(ev(i))
	}
	if err := l.Seal(); err != nil {
		t.Fatal(err)
	}
}

func lines(t *testing.T, path string) [][]byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(b, []byte("\n"))[:bytes.Count(b, []byte("\n"))]
}

func problem(t *testing.T, err error) *Problem {
	t.Helper()
	var p *Problem
	if !errors.As(err, &p) {
		t.Fatalf("want a problem, got %v", err)
	}
	return p
}

func TestChainVerifies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, _ := Open(path, Options{})
	fill(t, l, 5)
	fill(t, l, 3)
	s, err := Verify(Files(path), nil, nil)
	if err != nil || s.Records != 8 || s.Head.Seq != 8 || s.Incomplete != "" {
		t.Fatalf("%+v %v", s, err)
	}
}

func TestTamperingIsNamed(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	tests := []struct {
		name string
		edit func(ls [][]byte) [][]byte
		line int
		what string
	}{
		{"one byte edited", func(ls [][]byte) [][]byte {
			ls[2] = bytes.Replace(ls[2], []byte(`"n":2`), []byte(`"n":7`), 1)
			return ls
		}, 3, "edited: record 3"},
		{"hash edited", func(ls [][]byte) [][]byte { ls[1][len(ls[1])-4] ^= 1; return ls }, 2, "edited: record 2"},
		{"record removed", func(ls [][]byte) [][]byte { return append(ls[:3], ls[4:]...) }, 4, "removed: records 4 to 4 are missing"},
		{"first removed", func(ls [][]byte) [][]byte { return ls[1:] }, 1, "removed: the chain starts at record 2"},
		{"two swapped", func(ls [][]byte) [][]byte { ls[1], ls[2] = ls[2], ls[1]; return ls }, 2, "reordered: record 3 comes before record 2"},
		{"moved to the end", func(ls [][]byte) [][]byte {
			out := append([][]byte{ls[0]}, ls[2:]...)
			return append(out, ls[1])
		}, 2, "reordered: record 3 comes before record 2"},
		{"line not a record", func(ls [][]byte) [][]byte { ls[0] = []byte("{}\n"); return ls }, 1, "not a record"},
		{"tail cut before the checkpoint", func(ls [][]byte) [][]byte { return ls[:4] }, 4, "truncated: the log ends at record 4, before the checkpoint signed over record 6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			l, _ := Open(path, Options{Key: priv})
			fill(t, l, 6) // records 1-6, checkpoint 7
			head, err := ReadHead(path)
			if err != nil || head == nil || head.Seq != 6 {
				t.Fatalf("head %+v %v", head, err)
			}
			if s, err := Verify(Files(path), pub, head); err != nil || s.Signed != 1 {
				t.Fatalf("untouched: %+v %v", s, err)
			}
			ls := tt.edit(lines(t, path))
			os.WriteFile(path, bytes.Join(ls, nil), 0o600)
			_, err = Verify(Files(path), pub, head)
			p := problem(t, err)
			if p.Line != tt.line || !strings.Contains(p.What, tt.what) {
				t.Fatalf("got %v; want line %d, %q", p, tt.line, tt.what)
			}
		})
	}
}

func TestForgedCheckpoint(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, _ := Open(path, Options{Key: other})
	fill(t, l, 2)
	head, _ := ReadHead(path)
	_, err := Verify(Files(path), pub, head)
	if p := problem(t, err); !strings.Contains(p.What, "signed by key") {
		t.Fatal(p)
	}
	_ = priv
}

// Many writers, each with its own Log (as many cordon processes are): every
// record is there, once, in one chain.
func TestConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, _ := Open(path, Options{})
			for i := 0; i < 40; i++ {
				l.Add(Event{Sandbox: fmt.Sprintf("w%d", w), Kind: Input, Type: "result", Data: i})
				if i%3 == 0 {
					if err := l.Flush(); err != nil {
						t.Error(err)
					}
				}
			}
			if err := l.Flush(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	s, err := Verify(Files(path), nil, nil)
	if err != nil || s.Records != 8*40 {
		t.Fatalf("%+v %v", s, err)
	}
}

func TestRotationContinuesTheChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, _ := Open(path, Options{MaxSize: 2000})
	for i := 0; i < 10; i++ {
		fill(t, l, 5)
	}
	files := Files(path)
	if len(files) < 3 {
		t.Fatalf("files %v", files)
	}
	s, err := Verify(files, nil, nil)
	if err != nil || s.Records != 50 {
		t.Fatalf("%+v %v", s, err)
	}
	// The current file alone misses the start of the chain.
	_, err = Verify(files[len(files)-1:], nil, nil)
	if p := problem(t, err); !strings.Contains(p.What, "the chain starts at record") {
		t.Fatal(p)
	}
}

// A write cut off by a crash leaves an incomplete last line: verify reports
// it apart from the chain; the next writer removes it, and says so in the
// chain.
func TestIncompleteLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, _ := Open(path, Options{})
	fill(t, l, 3)
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"seq":4,"prev":"ab`)
	f.Close()
	s, err := Verify(Files(path), nil, nil)
	if err != nil || s.Records != 3 || !strings.Contains(s.Incomplete, "an incomplete last line of 19 bytes") {
		t.Fatalf("%+v %v", s, err)
	}
	fill(t, l, 1)
	s, err = Verify(Files(path), nil, nil)
	if err != nil || s.Records != 5 || s.Incomplete != "" {
		t.Fatalf("%+v %v", s, err)
	}
	if !bytes.Contains(lines(t, path)[3], []byte(`"type":"recovered"`)) {
		t.Fatal("no record of the recovery")
	}
}

// BenchmarkDurable measures events per second with every event durable
// before its Append returns: 1, 8 and 64 writers appending one event at a
// time to one Log, sharing syncs (group commit). events/sync says how many
// events each fdatasync served. Beside each, the same run measures what the
// disk allows: the median latency of an fdatasync after a one-line append
// to a file beside the log (sync-µs), and so the sync-bound limit, each
// writer waiting one sync per event (writers ÷ latency); of-limit is the
// events per second against it.
func BenchmarkDurable(b *testing.B) {
	for _, writers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			dir := b.TempDir()
			latency := syncLatency(b, filepath.Join(dir, "probe"), 200)
			path := filepath.Join(dir, "audit.jsonl")
			l, _ := Open(path, Options{})
			var syncs, syncNs atomic.Int64
			l.fsync = func(f *os.File) error {
				syncs.Add(1)
				start := time.Now()
				err := fdatasync(f)
				syncNs.Add(int64(time.Since(start)))
				return err
			}
			var wg sync.WaitGroup
			per := b.N/writers + 1
			b.ResetTimer()
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per; i++ {
						if err := l.Append(ev(i)); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			rate := float64(per*writers) / b.Elapsed().Seconds()
			limit := float64(writers) / latency.Seconds()
			b.ReportMetric(rate, "events/s")
			b.ReportMetric(float64(per*writers)/float64(max(syncs.Load(), 1)), "events/sync")
			b.ReportMetric(float64(latency.Microseconds()), "sync-µs")
			b.ReportMetric(float64(syncNs.Load())/float64(max(syncs.Load(), 1))/1e3, "log-sync-µs")
			b.ReportMetric(limit, "limit-events/s")
			b.ReportMetric(rate/limit, "of-limit")
		})
	}
}

// syncLatency is the median time of n one-line appends to path, each
// followed by an fdatasync: what one durable event costs at the least.
func syncLatency(b *testing.B, path string, n int) time.Duration {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	line := []byte(`{"probe":"one line of about the size of an event, to measure what a durable append costs"}` + "\n")
	ds := make([]time.Duration, n)
	for i := range ds {
		start := time.Now()
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
		if err := fdatasync(f); err != nil {
			b.Fatal(err)
		}
		ds[i] = time.Since(start)
	}
	slices.Sort(ds)
	return ds[n/2]
}

// Concurrent Appends share syncs, and each returns only once its record is
// in the part of the file a finished sync covered. The first sync is held
// until every writer has written: whatever it does not cover, the second
// covers.
func TestGroupCommitDurable(t *testing.T) {
	const writers = 8
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, _ := Open(path, Options{})
	allWritten := make(chan struct{})
	written := 0
	l.OnWrite(func(recs []Record) {
		if written += len(recs); written == writers {
			close(allWritten)
		}
	})
	var mu sync.Mutex
	var syncs int
	var durable int64 // the file's size when the last finished sync began
	l.fsync = func(f *os.File) error {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		mu.Lock()
		syncs++
		first := syncs == 1
		mu.Unlock()
		if first {
			<-allWritten
		}
		if err := fdatasync(f); err != nil {
			return err
		}
		mu.Lock()
		durable = max(durable, fi.Size())
		mu.Unlock()
		return nil
	}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := Event{Sandbox: fmt.Sprintf("writer-%d", w), Kind: Action, Type: "exec"}
			if err := l.Append(e); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			n := durable
			mu.Unlock()
			b, err := os.ReadFile(path)
			if err != nil {
				t.Error(err)
				return
			}
			if !bytes.Contains(b[:min(n, int64(len(b)))], []byte(`"sandbox":"`+e.Sandbox+`"`)) {
				t.Errorf("%s: Append returned before a sync covered its record", e.Sandbox)
			}
		}()
	}
	wg.Wait()
	if syncs < 1 || syncs > 2 {
		t.Errorf("%d syncs for %d records; want 1 or 2 (the first held, then one for the rest)", syncs, writers)
	}
	s, err := Verify(Files(path), nil, nil)
	if err != nil || s.Records != writers {
		t.Fatalf("%+v %v", s, err)
	}
}

// Writers that append again as soon as their record is durable are served
// by one sync each round, not split into two groups that take turns: the
// sync waits for the callers the last one released, for half a sync's
// time at most (here a sync takes 40 ms, long enough for the writers on
// any machine).
func TestGroupCommitGathers(t *testing.T) {
	const writers, rounds = 8, 20
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, _ := Open(path, Options{})
	l.maxGather = 10 * time.Second
	var syncs atomic.Int64
	l.fsync = func(f *os.File) error {
		syncs.Add(1)
		time.Sleep(40 * time.Millisecond)
		return fdatasync(f)
	}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				if err := l.Append(ev(i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// The first sync may cover only some writers; every later one covers
	// all that are still appending. Two groups taking turns would need
	// about twice as many.
	if n := syncs.Load(); n > rounds+rounds/4 {
		t.Errorf("%d syncs for %d writers appending %d times each; want at most %d", n, writers, rounds, rounds+rounds/4)
	}
}

// OnWrite sees each record as the file holds it: the same seq, prev and
// hash, in the chain's order, writes of any kind alike.
func TestOnWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, _ := Open(path, Options{})
	var seen []Record
	l.OnWrite(func(recs []Record) { seen = append(seen, recs...) })
	l.Add(ev(0), ev(1))
	if err := l.Write(); err != nil {
		t.Fatal(err)
	}
	l.Add(ev(2))
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	file := lines(t, path)
	if len(seen) != 3 || len(file) != 3 {
		t.Fatalf("%d records seen, %d lines", len(seen), len(file))
	}
	for i, line := range file {
		r, err := decode(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		if got := seen[i]; got.Seq != r.Seq || got.Prev != r.Prev || got.Hash != r.Hash || got.Type != r.Type {
			t.Fatalf("record %d: seen %+v, the file has %+v", i, got, r)
		}
	}
}

// A record's line is the JSON of the whole record with its hash last,
// whether its event was encoded with it or before its place was known.
func TestLineLayout(t *testing.T) {
	r := &Record{Seq: 42, Prev: strings.Repeat("ab", 32), Event: ev(3)}
	r.Time = r.Time.Add(1234)
	line, err := encode(r)
	if err != nil {
		t.Fatal(err)
	}
	whole, _ := json.Marshal(struct {
		Seq  int64  `json:"seq"`
		Prev string `json:"prev"`
		Event
	}{r.Seq, r.Prev, r.Event})
	want := append(whole[:len(whole)-1], []byte(hashKey+r.Hash+"\"}\n")...)
	if !bytes.Equal(line, want) {
		t.Fatalf("line\n%s\nwant\n%s", line, want)
	}
	back, err := decode(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil || back.Seq != 42 || back.Prev != r.Prev || back.Hash != r.Hash {
		t.Fatalf("%+v %v", back, err)
	}
}

// A sync that fails fails every Append it covered, and the chain says the
// events were lost: a later sync's success does not stand for them.
func TestFailedSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, _ := Open(path, Options{})
	fail := true
	l.fsync = func(f *os.File) error {
		if fail {
			return errors.New("input/output error")
		}
		return fdatasync(f)
	}
	if err := l.Append(ev(0)); err == nil || !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("append with a failing sync: %v", err)
	}
	if err := l.Flush(); err == nil {
		t.Fatal("a flush after a failed sync, nothing written since, succeeded")
	}
	fail = false
	if err := l.Append(ev(1)); err != nil {
		t.Fatal(err)
	}
	s, err := Verify(Files(path), nil, nil)
	if err != nil || s.Records != 3 {
		t.Fatalf("%+v %v", s, err)
	}
	if !bytes.Contains(lines(t, path)[1], []byte(`"type":"records_lost"`)) {
		t.Fatal("no record of the events whose sync failed")
	}
}

// Two processes appending to one log share syncs: one whose records a
// sync of the other covered does not sync again. Once a sync of the file
// failed, each syncs for itself. (Two Logs on one path stand for two
// processes: each opens the files itself.)
func TestSyncsSharedBetweenProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, _ := Open(path, Options{})
	b, _ := Open(path, Options{})
	var syncsA, syncsB atomic.Int64
	failA := false
	a.fsync = func(f *os.File) error {
		syncsA.Add(1)
		if failA {
			return errors.New("EIO")
		}
		return fdatasync(f)
	}
	b.fsync = func(f *os.File) error { syncsB.Add(1); return fdatasync(f) }
	if _, ok := identity(mustCreate(t, path)); !ok {
		t.Skip("the file system keeps no birth time: syncs are not shared")
	}

	// a has the file open; b writes, then a writes and syncs: the sync
	// covers b's record too.
	a.Add(ev(0))
	if err := a.Write(); err != nil {
		t.Fatal(err)
	}
	b.Add(ev(1))
	if err := b.Write(); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ev(2)); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if syncsA.Load() != 1 || syncsB.Load() != 0 {
		t.Fatalf("syncs: a %d, b %d; want a's to serve both", syncsA.Load(), syncsB.Load())
	}
	// Written after a's sync, b's next record is b's own to sync.
	if err := b.Append(ev(3)); err != nil {
		t.Fatal(err)
	}
	if syncsB.Load() != 1 {
		t.Fatalf("b synced %d times; want 1 for a record no sync covered", syncsB.Load())
	}
	// b writes; a's sync fails, and a later one succeeds, past b's
	// record: b still syncs for itself (the failed writeback may have
	// been b's, and only b's own sync reports it to b).
	a2, _ := Open(path, Options{}) // a fresh process: a's log is failed for good
	a2.fsync = a.fsync
	a2.Add(ev(40))
	if err := a2.Write(); err != nil {
		t.Fatal(err)
	}
	b.Add(ev(4))
	if err := b.Write(); err != nil {
		t.Fatal(err)
	}
	failA = true
	if err := a.Append(ev(5)); err == nil {
		t.Fatal("a failed sync reported success")
	}
	failA = false
	if err := a2.Append(ev(6)); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if syncsB.Load() != 2 {
		t.Fatalf("b synced %d times; want its own sync after another's failed", syncsB.Load())
	}
}

// A process's sync serves only the records written after it opened the
// file: a writeback of earlier ones may have failed and been reported to
// another process that did not say so (an older cordon, or one that died
// before it could), and then not to a file opened since.
func TestSharedSyncOpenedLater(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if _, ok := identity(mustCreate(t, path)); !ok {
		t.Skip("the file system keeps no birth time: syncs are not shared")
	}
	b, _ := Open(path, Options{})
	var syncsB atomic.Int64
	b.fsync = func(f *os.File) error { syncsB.Add(1); return fdatasync(f) }
	b.Add(ev(1))
	if err := b.Write(); err != nil {
		t.Fatal(err)
	}
	a, _ := Open(path, Options{})
	if err := a.Append(ev(2)); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if syncsB.Load() != 1 {
		t.Fatalf("b synced %d times; want 1: a opened the file after b wrote", syncsB.Load())
	}
}

// A process whose sync of the file failed says so with every later sync
// of it, even when the record of the failure was not kept (it could not be
// written, or the process died first): its file does not hear of that
// failure again, so its later syncs do not cover what the failed one
// lost.
func TestSharedSyncAfterUnrecordedFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if _, ok := identity(mustCreate(t, path)); !ok {
		t.Skip("the file system keeps no birth time: syncs are not shared")
	}
	a, _ := Open(path, Options{})
	b, _ := Open(path, Options{})
	failA := false
	a.fsync = func(f *os.File) error {
		if failA {
			return errors.New("EIO")
		}
		return fdatasync(f)
	}
	var syncsB atomic.Int64
	b.fsync = func(f *os.File) error { syncsB.Add(1); return fdatasync(f) }
	a.Add(ev(0))
	if err := a.Write(); err != nil {
		t.Fatal(err)
	}
	b.Add(ev(1))
	if err := b.Write(); err != nil {
		t.Fatal(err)
	}
	failA = true
	if err := a.Append(ev(2)); err == nil {
		t.Fatal("a failed sync reported success")
	}
	failA = false
	if err := os.Truncate(path+".lock", 0); err != nil { // the record lost
		t.Fatal(err)
	}
	if err := a.Append(ev(3)); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if syncsB.Load() != 1 {
		t.Fatalf("b synced %d times; want its own sync after a's failed", syncsB.Load())
	}
}

func mustCreate(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// A sync that covered an incomplete last line (a writer cut off) does not
// cover the records written where that line was once it was removed: the
// file shrank, and grew again under the offset the sync reached.
// The line cut off may be long, or be cut off so early that it holds
// only what the next record starts with too.
func TestSharedSyncAfterTruncation(t *testing.T) {
	for _, long := range []bool{true, false} {
		t.Run(fmt.Sprint("long=", long), func(t *testing.T) { testSharedSyncAfterTruncation(t, long) })
	}
}

func testSharedSyncAfterTruncation(t *testing.T, long bool) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if _, ok := identity(mustCreate(t, path)); !ok {
		t.Skip("the file system keeps no birth time: syncs are not shared")
	}
	a, _ := Open(path, Options{})
	if err := a.Append(ev(1)); err != nil {
		t.Fatal(err)
	}
	// A writer is cut off partway through a line.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	opened := fi.Size()
	head, _, err := lastRecord(f)
	if err != nil {
		t.Fatal(err)
	}
	cut := `{"seq":2,"prev":"` + head.Hash + `"`
	if long {
		cut += strings.Repeat("x", 8<<10)
	}
	f.Write([]byte(cut))
	fi, _ = f.Stat()
	// Another process syncs the file, cut-off line and all.
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syncShared(shared{lock: lock, opened: opened, begin: opened, end: fi.Size()}, f, fdatasync); err != nil {
		t.Fatal(err)
	}
	// It claims the complete lines only.
	if st, _ := readState(lock); st.Synced != fi.Size()-int64(len(cut)) {
		t.Fatalf("a sync claims %d bytes of %d, of which %d a line cut off", st.Synced, fi.Size(), len(cut))
	}
	// The next writer removes the line and writes where it was.
	b, _ := Open(path, Options{})
	var syncsB atomic.Int64
	b.fsync = func(f *os.File) error { syncsB.Add(1); return fdatasync(f) }
	if err := b.Append(ev(2)); err != nil {
		t.Fatal(err)
	}
	if syncsB.Load() != 1 {
		t.Fatalf("b synced %d times; want 1: no sync covered its records", syncsB.Load())
	}
}
