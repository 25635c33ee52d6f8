package hotkey

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/sluice-rl/sluice/limit"
)

// Config configures a Layer. The zero value of every field but Store means
// its default.
type Config struct {
	// Store is the shared store leases are claimed from and split
	// sub-buckets live in (required).
	Store limit.Store
	// Now is the clock of leases and of HotKeys; nil means time.Now.
	// Observe takes its time as an argument.
	Now func() time.Time
	// LeaseTTL is how long a lease's tokens may stay unused before they go
	// back to the shared bucket; 0 means 100ms.
	LeaseTTL time.Duration
	// MaxHot bounds the keys held hot and, separately, the leases held;
	// 0 means 1024. Past it a newly hot key is decided by the store as if it
	// were cold, and the least recently claimed lease is returned.
	MaxHot int
	// Timeout is the deadline of the store calls the Layer makes on its own:
	// returning the tokens of expired and evicted leases. It is called for
	// each, so that a timeout changed by a reload applies; nil means
	// limit.DefaultTimeout.
	Timeout func() time.Duration
}

// hotShards spreads the hot-key map so that writers of one key never block
// readers of another; readers never lock at all.
const hotShards = 64

// leaseShards spreads the lease caches, each an lru.Cache with its own lock.
const leaseShards = 16

// Layer is the hot-key layer of one sluice instance: it detects hot keys
// (Observe) and decides their requests (Decide) from leased tokens or split
// sub-buckets. It is safe for concurrent use. Close returns every leased
// token; call it before closing the Store.
type Layer struct {
	store   limit.Store
	now     func() time.Time
	ttl     time.Duration
	timeout func() time.Duration
	maxHot  int64
	seed    maphash.Seed

	sk     sketch
	hot    [hotShards]hotShard
	nhot   atomic.Int64
	pruned atomic.Int64 // ns of the last prune when full

	leases  [leaseShards]*lru.Cache[string, *lease]
	subs    *lru.Cache[*limit.Policy, []*limit.Policy]
	retMu   sync.Mutex
	returns []limit.Request // tokens of dead leases, not yet given back
	// epoch counts PoliciesChanged calls, under retMu: a lease's tokens
	// admit, and go back, only in the epoch they were claimed in.
	epoch atomic.Uint64

	// Close waits for the batches that create leases or claim (inflight)
	// before it returns their tokens; the last one out closes idle.
	closed   atomic.Bool
	inflight atomic.Int64
	idle     chan struct{}
	idleOnce sync.Once
	stop     chan struct{}
	done     chan struct{}

	st counters
}

// hotShard is a copy-on-write map: Observe reads it with one atomic load,
// and the rare writer (a key turning hot or cool) copies it under mu.
type hotShard struct {
	m  atomic.Pointer[map[string]*entry]
	mu sync.Mutex
}

// entry is one hot key.
type entry struct {
	key    string
	policy atomic.Pointer[limit.Policy]
	since  time.Time
	sample uint32       // the sketch counts 1 in sample requests, by sample
	below  atomic.Int64 // ns since the rate has been below threshold/2; 0 when above
	seen   atomic.Int64 // ns of the last Observe

	// The split hand-over of this hot spell (see handoff): the round in
	// progress, or the last one. A round that failed is replaced by the
	// next request's; mine is the hold this instance's hand-over asked
	// for (µs, even), which a later round asks for again while it lasts,
	// so that it knows the hold for its own; granted is the G its main
	// claim got (0 while unknown).
	round   atomic.Pointer[handRound]
	mine    atomic.Int64
	granted atomic.Int64
	// hold is until when (µs since the epoch) this instance holds the
	// key's main bucket for its split spell (see HoldFor); 0 when it does
	// not. ready is set once this instance has renewed it, which marks
	// the spell ready for the others (see handoff); renewing while a
	// claim that renews it is in flight.
	hold     atomic.Int64
	ready    atomic.Bool
	renewing atomic.Bool
}

// HoldFor is how long a split key's main bucket is held by each claim of
// the instances that split it: nothing refills it meanwhile, so no path
// that does not go through the sub-buckets (an RL.MTAKE, an instance
// where the key is not hot) spends the budget they hold. An instance
// renews its hold every RenewEvery, on a split decision; a key
// that cools everywhere stays held for at most this long, then refills
// from empty (an under-admission of at most HoldFor × rate, never more).
const HoldFor = time.Second

// RenewEvery is how often an instance in a split spell renews its hold on
// the main bucket (one claim on the main bucket's shard per hot key per
// instance): the longest a main bucket that an RL.RESET made fresh stays
// free while the sub-buckets, fresh too, are in use.
const RenewEvery = 100 * time.Millisecond

// HotKey is one line of RL.HOTKEYS.
type HotKey struct {
	Key    string
	Policy string
	Rate   float64 // requests/s on this instance over the last second
	Mode   limit.HotMode
	Since  time.Time // when it turned hot
}

// Stats are the Layer's counters for RL.INFO.
type Stats struct {
	HotKeys        int64 // hot now
	LeaseHits      int64 // takes admitted from leased tokens, no round trip
	LeaseRejects   int64 // takes rejected by a lease whose bucket was empty, no round trip
	Claims         int64 // OpClaim requests sent
	TokensClaimed  int64
	Returns        int64 // OpReturn requests sent
	TokensReturned int64
	ReturnErrors   int64 // OpReturn requests that failed: those tokens are lost until refill
	SplitDecisions int64
	SplitRetries   int64 // split takes that tried a second sub-bucket
	SplitHandoffs  int64 // hand-overs of a key's budget to its sub-buckets as it turned hot, each try (one that failed is tried again)
}

type counters struct {
	leaseHits, leaseRejects, claims, claimed, returns, returned, returnErrs, split, splitRetries, handoffs atomic.Int64
}

// New validates cfg and returns a Layer with its expiry goroutine running.
func New(cfg Config) (*Layer, error) {
	if cfg.Store == nil {
		return nil, errors.New("hotkey: Store is required")
	}
	if cfg.LeaseTTL < 0 || cfg.MaxHot < 0 {
		return nil, errors.New("hotkey: LeaseTTL and MaxHot must not be negative")
	}
	h := &Layer{
		store: cfg.Store, now: cfg.Now, ttl: cfg.LeaseTTL, timeout: cfg.Timeout,
		maxHot: int64(cfg.MaxHot), seed: maphash.MakeSeed(),
		stop: make(chan struct{}), done: make(chan struct{}), idle: make(chan struct{}),
	}
	h.sk.init()
	if h.now == nil {
		h.now = time.Now
	}
	if h.ttl == 0 {
		h.ttl = 100 * time.Millisecond
	}
	if h.timeout == nil {
		h.timeout = func() time.Duration { return limit.DefaultTimeout }
	}
	if h.maxHot == 0 {
		h.maxHot = 1024
	}
	for i := range h.hot {
		h.hot[i].m.Store(&map[string]*entry{})
	}
	per := max(1, int(h.maxHot)/leaseShards)
	for i := range h.leases {
		h.leases[i], _ = lru.NewWithEvict(per, h.evicted)
	}
	h.subs, _ = lru.New[*limit.Policy, []*limit.Policy](256)
	go h.run()
	return h, nil
}

// Observe counts one request for key under p at now and reports whether the
// key is hot: its rate on this instance reached p.Hot.Threshold and has not
// since stayed below half of it for a whole second. It is false when p has
// no hot mode. The limiter calls it for every request of a policy with a hot
// block. It takes no lock, and does not allocate unless the key turns hot.
func (h *Layer) Observe(key string, p *limit.Policy, now time.Time) bool {
	if p == nil || (p.Hot.Mode != limit.HotLease && p.Hot.Mode != limit.HotSplit) || p.Hot.Threshold < 1 {
		return false
	}
	hash := maphash.String(h.seed, key)
	ns := now.UnixNano()
	sh := &h.hot[hash%hotShards]
	e := (*sh.m.Load())[key]
	n := uint32(1)
	if e != nil && e.sample > 1 {
		// A hot key's counters are shared by every core; count 1 in
		// sample requests by sample to keep them from bouncing.
		if rand.Uint32()%e.sample != 0 {
			n = 0
		} else {
			n = e.sample
		}
	}
	rate := h.sk.add(hash, ns, n)
	thr := float64(p.Hot.Threshold)
	if e == nil {
		if rate < thr {
			return false
		}
		return h.heat(sh, key, p, now)
	}
	e.seen.Store(ns)
	if e.policy.Load() != p {
		e.policy.Store(p)
	}
	if rate >= thr/2 {
		if e.below.Load() != 0 {
			e.below.Store(0)
		}
		return true
	}
	b := e.below.Load()
	if b == 0 {
		e.below.CompareAndSwap(0, ns)
		return true
	}
	if ns-b < int64(time.Second) {
		return true
	}
	h.cool(sh, e)
	return false
}

// heat adds key to the hot map, unless the map is full of keys still hot.
func (h *Layer) heat(sh *hotShard, key string, p *limit.Policy, now time.Time) bool {
	ns := now.UnixNano()
	if h.nhot.Load() >= h.maxHot && !h.makeRoom(ns) {
		return false
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	old := *sh.m.Load()
	if old[key] != nil {
		return true
	}
	if h.nhot.Add(1) > h.maxHot {
		h.nhot.Add(-1)
		return false
	}
	e := &entry{key: strings.Clone(key), since: now, sample: sampling(p.Hot.Threshold)}
	e.round.Store(newRound(handNone))
	e.policy.Store(p)
	e.seen.Store(ns)
	m := make(map[string]*entry, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[e.key] = e
	sh.m.Store(&m)
	return true
}

// makeRoom drops the cooled keys of every shard, at most every 100ms (it
// copies the shards), and reports whether there is room for a hot key.
func (h *Layer) makeRoom(ns int64) bool {
	if last := h.pruned.Load(); ns-last >= int64(100*time.Millisecond) && h.pruned.CompareAndSwap(last, ns) {
		h.prune(ns)
	}
	return h.nhot.Load() < h.maxHot
}

// sampling returns the sampling factor of a key hot at threshold: a power
// of two that keeps at least 256 counted requests a second at half the
// threshold, where hysteresis decides, so the estimate's relative error
// there stays near 1/16.
func sampling(threshold int64) uint32 {
	if threshold < 1024 {
		return 1
	}
	return 1 << min(16, bits.Len64(uint64(threshold/512))-1)
}

// cool removes e from its shard.
func (h *Layer) cool(sh *hotShard, e *entry) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	old := *sh.m.Load()
	if old[e.key] != e {
		return
	}
	m := make(map[string]*entry, len(old))
	for k, v := range old {
		if v != e {
			m[k] = v
		}
	}
	sh.m.Store(&m)
	h.nhot.Add(-1)
}

// cooled reports whether e has cooled by now (ns): its rate was seen below
// half the threshold for a second, or it has had no request for a second
// and the sketch puts it below half the threshold now.
func (h *Layer) cooled(e *entry, ns int64) bool {
	if b := e.below.Load(); b != 0 && ns-b >= int64(time.Second) {
		return true
	}
	if ns-e.seen.Load() < int64(time.Second) {
		return false
	}
	p := e.policy.Load()
	return h.rate(e.key, ns) < float64(p.Hot.Threshold)/2
}

// pruneLocked drops the cooled entries of sh; sh.mu is held.
func (h *Layer) pruneLocked(sh *hotShard, ns int64) {
	old := *sh.m.Load()
	m := make(map[string]*entry, len(old))
	for k, e := range old {
		if !h.cooled(e, ns) {
			m[k] = e
		}
	}
	if len(m) != len(old) {
		sh.m.Store(&m)
		h.nhot.Add(int64(len(m) - len(old)))
	}
}

// prune drops every cooled entry.
func (h *Layer) prune(ns int64) {
	for i := range h.hot {
		sh := &h.hot[i]
		sh.mu.Lock()
		h.pruneLocked(sh, ns)
		sh.mu.Unlock()
	}
}

// hotEntry returns key's entry in the hot map, nil when it is not hot.
func (h *Layer) hotEntry(key string) *entry {
	return (*h.hot[maphash.String(h.seed, key)%hotShards].m.Load())[key]
}

// rate returns key's request rate on this instance at ns, counting nothing.
func (h *Layer) rate(key string, ns int64) float64 {
	return h.sk.add(maphash.String(h.seed, key), ns, 0)
}

// HotKeys returns the keys hot now, for RL.HOTKEYS, in no particular order.
func (h *Layer) HotKeys() []HotKey {
	now := h.now()
	ns := now.UnixNano()
	h.prune(ns)
	var out []HotKey
	for i := range h.hot {
		for _, e := range *h.hot[i].m.Load() {
			p := e.policy.Load()
			out = append(out, HotKey{Key: e.key, Policy: p.Name, Rate: h.rate(e.key, ns), Mode: p.Hot.Mode, Since: e.since})
		}
	}
	return out
}

// Stats returns the counters now.
func (h *Layer) Stats() Stats {
	h.prune(h.now().UnixNano())
	return Stats{
		HotKeys:   h.nhot.Load(),
		LeaseHits: h.st.leaseHits.Load(), LeaseRejects: h.st.leaseRejects.Load(),
		Claims: h.st.claims.Load(), TokensClaimed: h.st.claimed.Load(),
		Returns: h.st.returns.Load(), TokensReturned: h.st.returned.Load(), ReturnErrors: h.st.returnErrs.Load(),
		SplitDecisions: h.st.split.Load(), SplitRetries: h.st.splitRetries.Load(), SplitHandoffs: h.st.handoffs.Load(),
	}
}

// run expires leases and gives their tokens back, every half lease TTL.
func (h *Layer) run() {
	defer close(h.done)
	t := time.NewTicker(max(time.Millisecond, h.ttl/2))
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			h.expire(h.now().UnixNano())
			ctx, cancel := context.WithTimeout(context.Background(), h.timeout())
			_ = h.flush(ctx)
			cancel()
		}
	}
}

// Close stops the expiry goroutine and gives every leased token back to the
// store, within ctx. Decide after Close sends requests to the store as if
// no key were hot. It returns the errors of the returns that failed.
func (h *Layer) Close(ctx context.Context) error {
	if h.closed.Swap(true) {
		return nil
	}
	close(h.stop)
	<-h.done
	var err error
	if h.inflight.Load() != 0 {
		select {
		case <-h.idle:
		case <-ctx.Done():
			err = fmt.Errorf("hotkey: claims still in flight at close: %w", ctx.Err())
		}
	}
	for _, c := range h.leases {
		c.Purge()
	}
	return errors.Join(err, h.flush(ctx))
}
