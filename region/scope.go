package region

import (
	"context"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// A key whose policy stops being global spends one budget across the
// change: its regional bucket (the user-space key, shared by the region's
// instances) is emptied once by each instance before it decides the key
// as regional, so that it refills from empty at the new policy's rate
// instead of starting full beside what the global budget admitted.
//
// An instance that tracked the key as global knows it did. One that did
// not (the key's global traffic went to another instance of the region)
// learns it from the policy sets: every set it replaces that had a global
// policy is kept, with the time it was replaced, for as long as the
// global bucket of its slowest global policy takes to refill fully, plus
// the allocator's horizon and 1 s (window). The first regional request of
// a key that one of those sets made global, within that policy's window,
// empties the key's regional bucket, and a marker entry in the tracked
// keys says so until the window ends, when the allocator forgets it. A key
// that was never used globally under-admits once: its bucket starts empty
// instead of full. Past MaxKeys a key cannot be remembered, and its bucket
// is emptied at each request until the window ends (under-admission).

// setChange is a policy set this instance replaced, with the time (ns) it
// was replaced and the end of the windows of its global policies.
type setChange struct {
	old       PolicySet
	at, until int64
}

// maxChanges bounds the set changes remembered: past it the oldest is
// forgotten (a key it alone made global is then decided as regional from
// its bucket as it is).
const maxChanges = 64

// window is how long after a change of scope a global policy p may have
// spent a key's budget: the time its bucket takes to refill fully, plus the
// allocator's horizon (a pooled token may be admitted that much after it
// left home) and 1 s (the lag between instances putting a set in force).
func (l *Layer) window(p *limit.Policy) int64 {
	refill := time.Second
	if p.Rate > 0 {
		refill = time.Duration(float64(p.Period) * float64(p.Limit) / float64(p.Rate))
	}
	return int64(refill + l.horizon() + time.Second)
}

// noteSet records, when the policy set in force is not the one this
// instance saw last, the one it replaced, if that had global policies.
// The record is made before the new set counts as seen, so a request that
// finds the set seen finds its record too.
func (l *Layer) noteSet() {
	if l.policies == nil {
		return
	}
	s := l.policies()
	if s == l.seen.Load().s {
		return
	}
	l.chmu.Lock()
	defer l.chmu.Unlock()
	old := l.seen.Load().s
	if s == old {
		return
	}
	ns := l.now().UnixNano()
	until := int64(0)
	if old != nil {
		for _, p := range old.All() {
			if p.Global() {
				until = max(until, ns+l.window(p))
			}
		}
	}
	var live []setChange
	for _, c := range *l.changes.Load() {
		if ns < c.until {
			live = append(live, c)
		}
	}
	if until > 0 {
		live = append(live, setChange{old: old, at: ns, until: until})
		if len(live) > maxChanges {
			live = live[len(live)-maxChanges:]
		}
	}
	last := int64(0)
	for _, c := range live {
		last = max(last, c.until)
	}
	l.changes.Store(&live)
	l.changesUntil.Store(last)
	l.seen.Store(&setRef{s})
}

// pruneChanges forgets the set changes whose windows have all ended, so
// that regional requests stop looking at them.
func (l *Layer) pruneChanges(ns int64) {
	if last := l.changesUntil.Load(); last == 0 || ns < last {
		return
	}
	l.chmu.Lock()
	defer l.chmu.Unlock()
	if last := l.changesUntil.Load(); last > 0 && ns >= last {
		l.changes.Store(&[]setChange{})
		l.changesUntil.Store(0)
	}
}

// wasGlobal reports whether a set replaced within the window of its
// policy for key made key global, and until when (ns) that window lasts.
func (l *Layer) wasGlobal(key string, ns int64) (int64, bool) {
	if ns >= l.changesUntil.Load() {
		return 0, false
	}
	until := int64(0)
	for _, c := range *l.changes.Load() {
		if ns >= c.until {
			continue
		}
		if p := c.old.Match(key); p != nil && p.Global() && ns < c.at+l.window(p) {
			until = max(until, c.at+l.window(p))
		}
	}
	return until, until > 0
}

// scopeChanged empties, once, the regional bucket of every request in
// reqs whose key may have spent a global budget: this instance tracks it
// as global, or a policy set replaced within the window made it global.
// The allocator retires a tracked key at its next round; the entry stays,
// as a marker, until the window ends.
func (l *Layer) scopeChanged(ctx context.Context, reqs []limit.Request) {
	var claims []limit.Request
	ns := l.now().UnixNano()
	for i := range reqs {
		r := &reqs[i]
		if r.Policy == nil || r.Policy.Global() || r.Policy.Space != limit.SpaceUser {
			continue
		}
		if l.spentGlobally(r.Key, r.Policy, ns) {
			claims = append(claims, limit.Request{Key: r.Key, Cost: r.Policy.Limit, Op: limit.OpClaim, Policy: r.Policy})
		}
	}
	if len(claims) > 0 {
		l.inner.Do(ctx, claims, make([]limit.Result, len(claims)))
	}
}

// spentGlobally reports whether key's regional bucket, under the regional
// policy q, is to be emptied now: the first time this instance decides
// key as regional after a change of scope, and every time for a key past
// MaxKeys.
func (l *Layer) spentGlobally(key string, q *limit.Policy, ns int64) bool {
	for {
		if v, ok := l.keys.Load(key); ok {
			e := v.(*entry)
			if e.regional.Swap(true) {
				return false
			}
			until := ns + l.window(e.p.Load())
			if u, ok := l.wasGlobal(key, ns); ok {
				until = max(until, u)
			}
			e.until.Store(until)
			return true
		}
		until, ok := l.wasGlobal(key, ns)
		if !ok {
			return false
		}
		if l.nkeys.Load() >= l.maxKeys {
			l.st.untracked.Add(1)
			return true
		}
		e := &entry{key: key}
		e.p.Store(q)
		e.regional.Store(true)
		e.retired.Store(true)
		e.debited.Store(true)
		e.until.Store(until)
		if _, loaded := l.keys.LoadOrStore(key, e); !loaded {
			l.nkeys.Add(1)
			return true
		}
		// another request made the entry first: decide by it
	}
}
