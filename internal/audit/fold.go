package audit

import (
	"sync"
	"time"
)

// FoldEvery is how long a Folder counts repeats of an event before it
// records them as one.
const FoldEvery = time.Second

// RunRecords is how many records of folded events one run may write;
// past it, they are counted only.
const RunRecords = 10000

// Types of the records a Folder writes besides the events themselves.
const (
	RepeatedType = "repeated"
	BudgetType   = "audit_budget"
)

// Repeated is the data of a RepeatedType record: Count events of type Of
// that share Same (each a repeat of one recorded in full before), the
// first at First and the last at Last.
type Repeated struct {
	Of    string    `json:"of"`
	Same  any       `json:"same"`
	Count int       `json:"count"`
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

// Budget is the data of a BudgetType record, written when a run's folded
// events reach Records records, and again at the run's end with
// Unrecorded: how many events of each type were counted but not recorded
// since.
type Budget struct {
	Records    int            `json:"records"`
	Unrecorded map[string]int `json:"unrecorded,omitempty"`
}

// Folder writes one run's frequent events (network decisions) to a log,
// bounded: the first event of a kind is recorded in full; its repeats
// within every FoldEvery after are counted and recorded as one Repeated
// record when that interval ends, and at Close; and past a budget of
// records, events are counted only, summed at Close. Every event is in
// exactly one count: the full records, the Repeated counts and the
// budget's Unrecorded add up to the events added.
type Folder struct {
	log    *Log
	every  time.Duration
	budget int

	mu         sync.Mutex
	folds      map[foldKey]*fold
	written    int
	base       Event // the sandbox, agent and kind of the records it makes
	reached    bool
	unrecorded map[string]int
	stop       chan struct{}
	done       sync.WaitGroup
}

type foldKey struct {
	typ  string
	same any
}

// fold is an event's repeats counted since the interval that began at
// since.
type fold struct {
	since       time.Time
	n           int
	first, last time.Time
}

// NewFolder returns a Folder writing to l, folding repeats within every
// and writing at most budget records.
func NewFolder(l *Log, every time.Duration, budget int) *Folder {
	f := &Folder{log: l, every: every, budget: budget, folds: map[foldKey]*fold{},
		unrecorded: map[string]int{}, stop: make(chan struct{})}
	f.done.Add(1)
	go f.tick()
	return f
}

// tick ends the intervals that have passed, every interval.
func (f *Folder) tick() {
	defer f.done.Done()
	t := time.NewTicker(f.every)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case now := <-t.C:
			f.mu.Lock()
			for k, s := range f.folds {
				if now.Sub(s.since) >= f.every {
					f.endLocked(k, s, now)
				}
			}
			f.mu.Unlock()
		}
	}
}

// Add records e, or counts it as a repeat of the event of its type with
// the same same (a comparable value: what the repeats share, recorded as
// Repeated.Same).
func (f *Folder) Add(e Event, same any) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.base.Kind == "" {
		f.base = Event{Sandbox: e.Sandbox, Agent: e.Agent, Kind: e.Kind}
	}
	k := foldKey{e.Type, same}
	s := f.folds[k]
	if s != nil && e.Time.Sub(s.since) >= f.every {
		f.endLocked(k, s, e.Time)
		s = f.folds[k]
	}
	if s == nil {
		f.folds[k] = &fold{since: e.Time}
		f.recordLocked(e, e.Type, 1)
		return
	}
	if s.n == 0 {
		s.first = e.Time
	}
	s.n++
	s.last = e.Time
}

// endLocked ends the interval of s at now: its repeats, if any, are
// recorded as one and a new interval begins; else the next event of its
// kind is recorded in full.
func (f *Folder) endLocked(k foldKey, s *fold, now time.Time) {
	if s.n == 0 {
		delete(f.folds, k)
		return
	}
	r := f.base
	r.Time, r.Type = s.last, RepeatedType
	r.Data = Repeated{Of: k.typ, Same: k.same, Count: s.n, First: s.first, Last: s.last}
	f.recordLocked(r, k.typ, s.n)
	*s = fold{since: now}
}

// recordLocked writes e, which stands for n events of type of, within the
// budget; past it, counts them.
func (f *Folder) recordLocked(e Event, of string, n int) {
	if f.written >= f.budget {
		if !f.reached {
			f.reached = true
			b := f.base
			b.Time, b.Type, b.Data = time.Now().UTC(), BudgetType, Budget{Records: f.budget}
			f.log.Add(b)
		}
		f.unrecorded[of] += n
		return
	}
	f.written++
	f.log.Add(e)
	go f.log.Write() // at once, durable with the end of the run
}

// Close records the repeats still counted and, when the budget was
// reached, what it left unrecorded. The caller flushes the log after.
func (f *Folder) Close() {
	close(f.stop)
	f.done.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now().UTC()
	for k, s := range f.folds {
		f.endLocked(k, s, now)
	}
	if f.reached {
		b := f.base
		b.Time, b.Type, b.Data = now, BudgetType, Budget{Records: f.budget, Unrecorded: f.unrecorded}
		f.log.Add(b)
	}
}
