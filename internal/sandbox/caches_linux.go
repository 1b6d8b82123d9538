package sandbox

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/cache"
	"github.com/cordon-sandbox/cordon/internal/du"
	"github.com/cordon-sandbox/cordon/internal/outcome"
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// addCaches binds the agent's caches (the profile's caches:) into the
// spec, each read-write at cache.Inside/NAME/DIR, with the toolchains'
// variables naming them (where the profile sets one, its value stands).
// Caches recorded past the profile's cache_size are trimmed first. It
// returns their watch; nil when there are none to keep (opts names no
// place for them, or they could not be made: a note says so).
func addCaches(spec *Spec, opts Options, res *Result) (*cacheWatch, error) {
	p := opts.Profile
	if len(p.Caches) == 0 || opts.CacheRoot == "" {
		return nil, nil
	}
	kinds, err := cache.Expand(p.Caches)
	if err != nil {
		return nil, setupErr("caches", err)
	}
	for _, m := range spec.Mounts {
		if cache.Overlaps(m.Target) {
			return nil, setupErr("caches", fmt.Errorf("the caches appear inside at %s, and %s is bound at %s", cache.Inside, m.Source, m.Target))
		}
	}
	store, err := cache.Open(opts.CacheRoot, p.Agent)
	if err != nil {
		return nil, setupErr("caches", err)
	}
	plan := &cache.Plan{Store: store, Kinds: kinds, Size: quantity(p.Resources.CacheSize), Offline: !p.Network.Enabled()}
	w := &cacheWatch{plan: plan, bound: cache.Bound(plan.Size)}
	if u, ok := store.Recorded(); ok && plan.Size > 0 && (u.Bytes > w.bound.Bytes || u.Inodes > w.bound.Inodes) {
		// Past a limit lowered since, or a run's end that could not trim.
		cleared, err := store.Trim(plan.Size)
		w.cleared = names(cleared)
		if err != nil {
			w.err = err.Error()
		}
	}
	if err := store.Prepare(kinds); err != nil {
		res.Notes = append(res.Notes, fmt.Sprintf("the profile's caches are not kept on this run: %v", err))
		return nil, nil
	}
	// The record is not what the caches hold now (a run of the agent still
	// going writes them, and records what it saw when it ends): the first
	// check walks them.
	w.free = freeOn(store.Dir)
	for _, b := range plan.Binds() {
		spec.Mounts = append(spec.Mounts, Mount{Source: b.Host, Target: b.Target, Writable: true})
		spec.caches = append(spec.caches, b.Target)
	}
	for _, kv := range plan.Env() {
		name, value, _ := strings.Cut(kv, "=")
		if _, set := p.Env.Set[name]; !set {
			spec.Env = wire.SetEnv(spec.Env, name, value)
		}
	}
	return w, nil
}

// names lists the caches of entries.
func names(entries []cache.Entry) []string {
	var out []string
	for _, en := range entries {
		out = append(out, en.Name)
	}
	return out
}

// cacheWatch bounds an agent's caches while a sandbox of it runs, and
// says what they held when it ended. Walking them costs time in
// proportion to what they hold, so while the sandbox runs they are walked
// only when the file system they are on has lost more room since they
// were last measured than their limit has left: until then, what was
// measured plus what the file system lost bounds what they hold, unless
// room was freed elsewhere on it (the sandbox's own workspace), so that
// when the run ends they are walked whatever the loss.
type cacheWatch struct {
	plan    *cache.Plan
	bound   du.Bound
	cleared []string
	err     string

	mu sync.Mutex
	// known is what the caches held when last walked; ok says they were,
	// free is the file system's free blocks, their size and free inodes
	// then.
	known du.Use
	free  *[3]uint64
	ok    bool
	// last is the last measure, walked or not.
	last du.Use
}

// freeOn measures the free room of the file system dir is on.
func freeOn(dir string) *[3]uint64 {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return nil
	}
	return &[3]uint64{st.Bfree, uint64(st.Bsize), st.Ffree}
}

// check measures the caches: from the file system's loss since they
// were last walked when that shows them within their bound, else by a walk
// when walk is set, or when the loss is past the bound by the larger of
// the bound and fsSlack (the caches may have grown that fast; as often,
// another writer on the file system took the room, which ends no run);
// known is false when the loss says neither. A walk that meets what it
// cannot measure (a tree deeper than it descends, a directory closed to
// it) says the caches are past their bound.
func (w *cacheWatch) check(walk bool) (u du.Use, known bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := freeOn(w.plan.Store.Dir)
	if w.ok && now != nil && w.bound.Bytes > 0 {
		lost := int64(w.free[0]-min(w.free[0], now[0])) * int64(now[1])
		lostInodes := int64(w.free[2] - min(w.free[2], now[2]))
		u = du.Use{Bytes: w.known.Bytes + lost, Inodes: w.known.Inodes + lostInodes}
		switch {
		case u.Bytes <= w.bound.Bytes && u.Inodes <= w.bound.Inodes:
			w.last = u
			return u, true, nil
		case u.Bytes > w.bound.Bytes+max(w.bound.Bytes, fsSlack) || u.Inodes > w.bound.Inodes+max(w.bound.Inodes, fsSlackInodes):
			walk = true
		}
	}
	if !walk {
		return u, false, nil
	}
	return w.walk(now)
}

// walk measures the caches by walking them; now is the file system's
// free room before (see freeOn). w.mu is held.
func (w *cacheWatch) walk(now *[3]uint64) (du.Use, bool, error) {
	u, err := w.plan.Store.Use(w.bound)
	if err != nil {
		return u, false, err
	}
	w.known, w.free, w.ok, w.last = u, now, now != nil, u
	return u, true, nil
}

// watch ends the run once the caches are past their bound, checking every
// diskEvery, and walking them no more often than twenty times as long as
// the last walk took, until stop is closed.
func (w *cacheWatch) watch(lim *limiter, stop <-chan struct{}) {
	if w.bound.Bytes == 0 {
		return
	}
	t := time.NewTicker(diskEvery)
	defer t.Stop()
	var walked time.Time
	wait := time.Duration(0)
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		began := time.Now()
		walk := began.Sub(walked) >= wait
		u, known, err := w.check(walk)
		if err == nil && known && u.Past {
			lim.trip("cache_size")
			return
		}
		if walk {
			walked, wait = time.Now(), 20*time.Since(began)
		}
	}
}

// end walks the caches once the sandbox has ended (what the file system
// lost does not bound them: the sandbox may have freed room elsewhere on
// it), records what they hold, and trims them when past their bound: what
// could not be measured and the least recently used first, until within
// it.
func (w *cacheWatch) end() *outcome.Caches {
	c := &outcome.Caches{Names: w.plan.Names(), Cleared: w.cleared, Error: w.err}
	w.mu.Lock()
	u, _, err := w.walk(freeOn(w.plan.Store.Dir))
	w.mu.Unlock()
	if err != nil {
		c.Error = fmt.Sprintf("measuring the caches: %v", err)
		return c
	}
	c.Bytes, c.Files, c.Past = u.Bytes, u.Inodes, u.Past
	if !u.Past {
		if err := w.plan.Store.Record(u); err != nil {
			c.Error = err.Error()
		}
		return c
	}
	cleared, err := w.plan.Store.Trim(w.plan.Size)
	c.Cleared = append(c.Cleared, names(cleared)...)
	if err != nil {
		c.Error = err.Error()
	}
	return c
}

// used is the fraction of cache_size the caches held when last measured.
func (w *cacheWatch) used() float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.bound.Bytes == 0 {
		return -1
	}
	return float64(w.last.Bytes) / float64(w.bound.Bytes)
}
