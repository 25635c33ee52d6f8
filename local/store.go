package local

import (
	"context"
	"errors"
	"hash/maphash"
	"math"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// Config configures a Store. The zero value is usable.
type Config struct {
	// Now is the clock; nil means time.Now. Tests pass a fake one.
	Now func() time.Time
	// DecidedBy labels every result; "" means limit.ByEmbedded.
	DecidedBy string
	// MaxKeys bounds the states held; 0 means 1,000,000. Only a state that
	// reads the same as none may be dropped to make room: one whose
	// lifetime has passed (a bucket refilled, a window ended, every slot
	// expired), or a region's pool (an absent pool is an empty one, so its
	// loss refuses more, never admits more). A state still limiting (a
	// bucket not yet full, a window's count, a held slot) is never dropped:
	// when only such states are left, a request that would write a new key
	// is answered with ErrFull, and counted (Full), until one expires.
	// Keys already held keep being decided.
	MaxKeys int
}

const shards = 64

// Store is the in-process store. It is safe for concurrent use; keys are
// spread over independently locked shards, so there is no global lock.
type Store struct {
	now       func() time.Time
	decidedBy string
	perShard  int
	seed      maphash.Seed
	shards    [shards]shard
	receipts  receiptBook // receipt.go
}

type shard struct {
	mu      sync.Mutex
	buckets map[stateKey]*entry
	ops     uint32
	// soonest, when the shard was last found full of live states, is a
	// lower bound of every expiry kept: until then a sweep frees nothing,
	// so a new key is refused without one. setExpiry keeps it a bound.
	soonest int64
	full    uint64 // new keys refused with ErrFull
}

// ErrFull is the error of a request that would add a key to a Store whose
// every state is still limiting (Config.MaxKeys): dropping one to make
// room would admit more than its limit.
var ErrFull = errors.New("in-process store full: every key it holds is still limiting (max_keys); a new key is refused until one expires")

// stateKey names one stored state: a key within its space
// (limit.Space), so that an internal state never shares a user key's.
type stateKey struct {
	space limit.Space
	key   string
}

// keyOf is the state r decides: r.Key in the space of its policy.
func keyOf(r *limit.Request) stateKey {
	if r.Policy == nil {
		return stateKey{key: r.Key}
	}
	return stateKey{r.Policy.Space, r.Key}
}

type entry struct {
	st      State
	expires int64 // µs: from then on the state is the same as none
}

var _ limit.Store = (*Store)(nil)

// New returns an empty Store.
func New(cfg Config) *Store {
	s := &Store{now: cfg.Now, decidedBy: cfg.DecidedBy, seed: maphash.MakeSeed()}
	if s.now == nil {
		s.now = time.Now
	}
	if s.decidedBy == "" {
		s.decidedBy = limit.ByEmbedded
	}
	maxKeys := cfg.MaxKeys
	if maxKeys <= 0 {
		maxKeys = 1_000_000
	}
	s.perShard = max(1, maxKeys/shards)
	for i := range s.shards {
		s.shards[i].buckets = make(map[stateKey]*entry)
	}
	return s
}

// Do decides every request at one instant of the Store's clock.
func (s *Store) Do(_ context.Context, reqs []limit.Request, out []limit.Result) {
	now := s.now().UnixMicro()
	for i := range reqs {
		out[i] = s.decide(&reqs[i], now)
	}
}

func (s *Store) decide(r *limit.Request, now int64) limit.Result {
	if receipted(r) {
		return s.decideReceipt(r, now)
	}
	sh := &s.shards[maphash.String(s.seed, r.Key)%shards]
	sh.mu.Lock()
	res := sh.decide(r, now, s.perShard)
	sh.mu.Unlock()
	res.DecidedBy = s.decidedBy
	return res
}

// decide decides r with sh locked.
func (sh *shard) decide(r *limit.Request, now int64, perShard int) limit.Result {
	k := keyOf(r)
	e := sh.buckets[k]
	var st State
	if e != nil && e.expires > now { // past it, the key is gone, as its TTL'd key in Redis
		st = e.st
	}
	from := r.Window
	if r.Op == limit.OpClaim {
		from = r.Hold
	}
	res, changed, err := Decide(&st, Input{Policy: r.Policy, Op: r.Op, Cost: r.Cost, Now: now, From: from})
	if err != nil {
		return limit.Result{Err: err}
	}
	switch {
	case changed && st == State{}: // full again: the same as no state
		if e != nil {
			delete(sh.buckets, k)
		}
	case changed:
		if e == nil {
			e = &entry{}
			if !sh.insert(k, e, now, perShard) {
				return limit.Result{Err: ErrFull}
			}
		}
		e.st = st
		sh.setExpiry(e, now+lifetime(r.Policy, res))
	}
	return res
}

// lifetime is how long, in µs, a key written with res under p keeps its
// state: until it reads as none again (ResetAfterMs: a bucket full, a
// window empty), or for a pool, which never changes by itself, its TTL.
func lifetime(p *limit.Policy, res limit.Result) int64 {
	if p.Algorithm == limit.Pool {
		if pp, err := p.Pool(); err == nil {
			return pp.TTLMs * 1000
		}
	}
	return res.ResetAfterMs * 1000
}

// insert adds e, first making room by dropping the states that read as
// none (see Config.MaxKeys), and reports whether it did: false when the
// shard holds maxLen live states. A sweep runs when the shard is full and
// may free something (sh.soonest), and every 1024 inserts, so that its
// cost is amortised.
func (sh *shard) insert(key stateKey, e *entry, now int64, maxLen int) bool {
	sh.ops++
	full := len(sh.buckets) >= maxLen
	if (full && now >= sh.soonest) || sh.ops%1024 == 0 {
		sh.sweep(now, full)
		full = len(sh.buckets) >= maxLen
	}
	if full {
		sh.full++
		return false
	}
	sh.buckets[key] = e
	return true
}

// sweep drops every state that reads as none at now, and when the shard
// is full the pools too; it sets sh.soonest to the earliest expiry kept.
func (sh *shard) sweep(now int64, full bool) {
	soonest := int64(math.MaxInt64)
	for k, old := range sh.buckets {
		switch {
		case old.expires <= now, full && old.st.kind == kindPool:
			delete(sh.buckets, k)
		default:
			soonest = min(soonest, old.expires)
		}
	}
	sh.soonest = soonest
}

// setExpiry sets e's expiry, keeping sh.soonest a lower bound of every
// expiry in the shard; a pool, which may be dropped at any time, makes
// the next full insert sweep.
func (sh *shard) setExpiry(e *entry, exp int64) {
	e.expires = exp
	if e.st.kind == kindPool {
		sh.soonest = 0
	}
	sh.soonest = min(sh.soonest, exp)
}

var _ limit.Atomic = (*Store)(nil)

// Group puts every key in one group: DoAll locks what it needs.
func (s *Store) Group(string, *limit.Policy) int { return 0 }

// DoAll takes every request or none, at one instant, with the shards of
// every key locked (in shard order, so that concurrent calls cannot
// deadlock): every key is peeked, and taken only when every peek allows.
// A key named twice can still fail its second take; then the takes before
// it are given back.
func (s *Store) DoAll(_ context.Context, reqs []limit.Request, out []limit.Result) bool {
	now := s.now().UnixMicro()
	idx := make([]int, len(reqs))
	var locked [shards]bool
	for i := range reqs {
		idx[i] = int(maphash.String(s.seed, reqs[i].Key) % shards)
		locked[idx[i]] = true
	}
	for i := range locked {
		if locked[i] {
			s.shards[i].mu.Lock()
			defer s.shards[i].mu.Unlock()
		}
	}
	call := func(i int, op limit.Op) limit.Result {
		r := reqs[i]
		r.Op = op
		res := s.shards[idx[i]].decide(&r, now, s.perShard)
		res.DecidedBy = s.decidedBy
		return res
	}
	ok := true
	for i := range reqs {
		out[i] = call(i, limit.OpPeek)
		if out[i].Err != nil {
			for j := range out {
				out[j] = limit.Result{Err: out[i].Err}
			}
			return false
		}
		ok = ok && out[i].Allowed
	}
	if !ok {
		return false
	}
	for i := range reqs {
		out[i] = call(i, limit.OpTake)
		if !out[i].Allowed {
			for j := range i {
				out[j] = call(j, limit.OpReturn)
			}
			if err := out[i].Err; err != nil { // ErrFull: a new key found no room
				for j := range out {
					out[j] = limit.Result{Err: err}
				}
			}
			return false
		}
	}
	return true
}

// Reset forgets key's state under p (its space).
func (s *Store) Reset(_ context.Context, key string, p *limit.Policy) (bool, error) {
	k := keyOf(&limit.Request{Key: key, Policy: p})
	sh := &s.shards[maphash.String(s.seed, key)%shards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.buckets[k]
	delete(sh.buckets, k)
	return e != nil && e.expires > s.now().UnixMicro(), nil
}

// Full returns the number of new keys refused with ErrFull.
func (s *Store) Full() uint64 {
	n := uint64(0)
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.full
		sh.mu.Unlock()
	}
	return n
}

// Len returns the number of buckets held.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.buckets)
		sh.mu.Unlock()
	}
	return n
}

// Close releases nothing; it exists to satisfy limit.Store.
func (s *Store) Close() error { return nil }

// InProcess reports true: the Store decides in this process and never
// waits on a network, so a caller need not give it a deadline.
func (s *Store) InProcess() bool { return true }
