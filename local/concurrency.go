package local

import (
	"context"
	"hash/maphash"

	"github.com/sluice-rl/sluice/limit"
)

// SlotState is one concurrency limit's held slots, as concurrency.lua
// keeps them in a sorted set: each token and its expiry (µs since the
// epoch). The zero value holds none. A slot whose expiry is not after now
// is free.
type SlotState struct {
	held   map[string]int64
	visits int64 // slots looked at, for the test of the cost of an acquire
}

// Held returns the slots held at now.
func (st *SlotState) Held(now int64) int64 {
	n := int64(0)
	for _, exp := range st.held {
		if exp > now {
			n++
		}
	}
	return n
}

// expire drops the slots that have freed themselves by now.
func (st *SlotState) expire(now int64) {
	for tok, exp := range st.held {
		st.visits++
		if exp <= now {
			delete(st.held, tok)
		}
	}
}

// AcquireSlot takes a slot for token until now + ttlMs if fewer than
// limitN are held at now (µs), as concurrency.lua's acquire: Remaining is
// the free slots after, RetryAfterMs -1 when allowed, else the ms until
// the earliest slot frees (at least 1); ResetAfterMs the ms until every
// slot held after the decision frees. A token already held is renewed,
// taking no second slot. It is O(held).
func AcquireSlot(st *SlotState, limitN int64, token string, ttlMs, now int64) limit.Result {
	st.expire(now)
	held := int64(len(st.held))
	res := limit.Result{Limit: limitN, RetryAfterMs: -1}
	if held < limitN {
		if st.held == nil {
			st.held = make(map[string]int64)
		}
		if _, dup := st.held[token]; !dup {
			held++
		}
		st.held[token] = now + ttlMs*1000
		res.Allowed = true
	}
	first, last := int64(0), int64(0)
	for _, exp := range st.held {
		st.visits++
		if first == 0 || exp < first {
			first = exp
		}
		last = max(last, exp)
	}
	if held > 0 {
		res.ResetAfterMs = ceilDiv(last-now, 1000)
		if !res.Allowed {
			res.RetryAfterMs = max(1, ceilDiv(first-now, 1000))
		}
	}
	res.Remaining = max(0, limitN-held)
	return res
}

// ReleaseSlot frees token's slot and reports whether it was held at now
// (known, and not yet expired), as concurrency.lua's release.
func ReleaseSlot(st *SlotState, token string, now int64) bool {
	exp, ok := st.held[token]
	delete(st.held, token)
	return ok && exp > now
}

var _ limit.SlotStore = (*Store)(nil)

// Acquire takes one of p's slots under key for token (limit.SlotStore).
// A key holding another algorithm's state is never read as free slots:
// every slot reads as held until that state expires, as in Redis.
func (s *Store) Acquire(_ context.Context, key string, p *limit.Policy, token string, ttlMs int64) limit.Result {
	sp, err := p.Slots()
	if err != nil {
		return limit.Result{Err: err}
	}
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
		left := max(1, ceilDiv(e.expires-now, 1000))
		return limit.Result{Limit: sp.Limit, RetryAfterMs: left, ResetAfterMs: left, DecidedBy: s.decidedBy}
	}
	if e == nil {
		e = &entry{st: State{Slots: &SlotState{}, kind: kindSlots}}
		sh.insert(k, e, now, s.perShard)
	}
	res := AcquireSlot(e.st.Slots, sp.Limit, token, ttlMs, now)
	res.DecidedBy = s.decidedBy
	switch {
	case len(e.st.Slots.held) == 0:
		delete(sh.buckets, k)
	case res.Allowed:
		e.expires = now + (res.ResetAfterMs+1000)*1000 // as the script's PEXPIRE
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
	if len(e.st.Slots.held) == 0 {
		delete(sh.buckets, k)
	}
	return held, nil
}
