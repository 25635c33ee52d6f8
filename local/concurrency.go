package local

import (
	"context"
	"hash/maphash"

	"github.com/sluice-rl/sluice/limit"
)

// SlotState is one concurrency limit's held slots, as concurrency.lua
// keeps them in a sorted set: each token and its expiry (µs since the
// epoch). The zero value holds none. A slot whose expiry is not after now
// is free. Slots are found by token in a map and by expiry in two heaps
// (slotheap.go), so that an acquire or a release costs O(log held), as
// the sorted set's.
type SlotState struct {
	byToken map[string]*slot
	heaps   [2]slotHeap // [early]: the next to expire on top; [late]: the last
	visits  int64       // slots looked at, for the test of the cost of an acquire
}

// Held returns the slots held at now. It looks at the expired slots only
// (and their children in the heap), not at every held one.
func (st *SlotState) Held(now int64) int64 {
	n := int64(len(st.byToken))
	h := st.heaps[early].s
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(h) || h[i].exp > now {
			continue
		}
		n--
		stack = append(stack, 2*i+1, 2*i+2)
	}
	return n
}

// len is the number of slots kept, expired ones included until expire.
func (st *SlotState) len() int { return len(st.byToken) }

// earliest and latest are the expiries of the first and last slot to
// free itself; the state must hold one.
func (st *SlotState) earliest() int64 { return st.heaps[early].top().exp }
func (st *SlotState) latest() int64   { return st.heaps[late].top().exp }

// put holds token until exp: a new slot, or the token's slot renewed.
func (st *SlotState) put(token string, exp int64) {
	if x := st.byToken[token]; x != nil {
		x.exp = exp
		for w := range st.heaps {
			st.heaps[w].fix(x.at[w], &st.visits)
		}
		return
	}
	if st.byToken == nil {
		st.byToken = make(map[string]*slot)
		st.heaps[late].which = late
	}
	x := &slot{token: token, exp: exp}
	st.byToken[token] = x
	for w := range st.heaps {
		st.heaps[w].push(x, &st.visits)
	}
}

// drop frees x's slot.
func (st *SlotState) drop(x *slot) {
	delete(st.byToken, x.token)
	for w := range st.heaps {
		st.heaps[w].remove(x.at[w], &st.visits)
	}
}

// expire drops the slots that have freed themselves by now: O(log held)
// for each.
func (st *SlotState) expire(now int64) {
	for st.len() > 0 && st.earliest() <= now {
		st.visits++
		st.drop(st.heaps[early].top())
	}
}

// AcquireSlot takes a slot for token until now + ttlMs if fewer than
// limitN are held at now (µs), as concurrency.lua's acquire: Remaining is
// the free slots after, RetryAfterMs -1 when allowed, else the ms until
// the earliest slot frees (at least 1); ResetAfterMs the ms until every
// slot held after the decision frees. A token already held is renewed,
// taking no second slot. It is O(log held), plus O(log held) for each
// slot that expired since the last call.
func AcquireSlot(st *SlotState, limitN int64, token string, ttlMs, now int64) limit.Result {
	st.expire(now)
	res := limit.Result{Limit: limitN, RetryAfterMs: -1}
	if int64(st.len()) < limitN {
		st.put(token, now+ttlMs*1000)
		res.Allowed = true
	}
	held := int64(st.len())
	if held > 0 {
		res.ResetAfterMs = ceilDiv(st.latest()-now, 1000)
		if !res.Allowed {
			res.RetryAfterMs = max(1, ceilDiv(st.earliest()-now, 1000))
		}
	}
	res.Remaining = max(0, limitN-held)
	return res
}

// ReleaseSlot frees token's slot and reports whether it was held at now
// (known, and not yet expired), as concurrency.lua's release.
func ReleaseSlot(st *SlotState, token string, now int64) bool {
	x := st.byToken[token]
	if x == nil {
		return false
	}
	st.drop(x)
	return x.exp > now
}

var _ limit.SlotStore = (*Store)(nil)

// Acquire takes one of p's slots under key for token (limit.SlotStore).
// A key holding another algorithm's state holds none of p's slots: it is
// replaced by a set of slots, as in Redis (concurrency.lua).
func (s *Store) Acquire(_ context.Context, key string, p *limit.Policy, token string, ttlMs int64) limit.Result {
	sp, err := p.Slots()
	if err != nil {
		return limit.Result{Err: err}
	}
	return s.acquire(key, p, sp.Limit, token, ttlMs)
}

// Hold holds a slot for token under key for ttlMs past p's limit: the
// slots the `open` fallback admits, kept so that they count once the store
// answers again (see Held). It keeps at most HoldCap(p) per key, so that an
// outage under `open` cannot fill memory; past that, and in a full store
// (ErrFull), a slot is not kept.
func (s *Store) Hold(key string, p *limit.Policy, token string, ttlMs int64) {
	s.acquire(key, p, HoldCap(p), token, ttlMs)
}

// HoldCap is the most slots Hold keeps for one key of p: 4 × its limit, at
// least 64, at most limit.MaxSlots.
func HoldCap(p *limit.Policy) int64 {
	return min(limit.MaxSlots, max(64, 4*p.Limit))
}

// Held reports the slots held under key for p's space at now, and the ms
// until the earliest and the last of them frees itself (0 when none).
func (s *Store) Held(key string, p *limit.Policy) (held, nextMs, lastMs int64) {
	now := s.now().UnixMicro()
	sh := &s.shards[maphash.String(s.seed, key)%shards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.buckets[stateKey{p.Space, key}]
	if e == nil || e.expires <= now || e.st.kind != kindSlots {
		return 0, 0, 0
	}
	st := e.st.Slots
	st.expire(now)
	if st.len() == 0 {
		return 0, 0, 0
	}
	return int64(st.len()), ceilDiv(st.earliest()-now, 1000), ceilDiv(st.latest()-now, 1000)
}

// acquire is Acquire with limitN slots.
func (s *Store) acquire(key string, p *limit.Policy, limitN int64, token string, ttlMs int64) limit.Result {
	now := s.now().UnixMicro()
	k := stateKey{p.Space, key}
	sh := &s.shards[maphash.String(s.seed, key)%shards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.buckets[k]
	if e != nil && e.expires <= now {
		delete(sh.buckets, k)
		e = nil
	}
	if e != nil && e.st.kind != kindSlots {
		delete(sh.buckets, k)
		e = nil
	}
	if e == nil {
		e = &entry{st: State{Slots: &SlotState{}, kind: kindSlots}}
		if !sh.insert(k, e, now, s.perShard) {
			return limit.Result{Err: ErrFull}
		}
	}
	res := AcquireSlot(e.st.Slots, limitN, token, ttlMs, now)
	res.DecidedBy = s.decidedBy
	switch {
	case e.st.Slots.len() == 0:
		delete(sh.buckets, k)
	case res.Allowed:
		sh.setExpiry(e, now+(res.ResetAfterMs+1000)*1000) // as the script's PEXPIRE
	}
	return res
}

// Release frees the slot token holds under key (limit.SlotStore); it
// reports whether it was held.
func (s *Store) Release(_ context.Context, key string, p *limit.Policy, token string) (bool, error) {
	now := s.now().UnixMicro()
	k := stateKey{p.Space, key}
	sh := &s.shards[maphash.String(s.seed, key)%shards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.buckets[k]
	if e == nil || e.expires <= now || e.st.kind != kindSlots {
		return false, nil
	}
	held := ReleaseSlot(e.st.Slots, token, now)
	if e.st.Slots.len() == 0 {
		delete(sh.buckets, k)
	}
	return held, nil
}
