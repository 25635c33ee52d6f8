package region

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// Home is the home store of the global budgets. Its buckets are claimed
// from (limit.OpClaim, a partial grant) and given back to (limit.OpReturn);
// its demand boards say what every instance of every region wants.
// cluster.Store implements it.
type Home interface {
	limit.Store
	// Exchange deletes the fields drop[i] of keys[i]'s board, sets field
	// to values[i], makes the board expire ttl after this write and reads
	// every field back.
	Exchange(ctx context.Context, keys []string, field string, values []string, drop [][]string, ttl time.Duration) ([]map[string]string, error)
	// Ping checks that home answers, in a round with nothing to exchange.
	Ping(ctx context.Context) error
}

// Config configures a Layer.
type Config struct {
	// Region names this instance's region (required); Instance names the
	// instance on the demand boards, "" meaning a random one.
	Region, Instance string
	// Home is the home store (required).
	Home Home
	// Tick is how often the allocator looks at demand, claims and
	// reports; 0 means DefaultTick. A shortage also starts a round at once.
	Tick time.Duration
	// HomeTimeout is the deadline of every call to the home store, and
	// how long home may stay silent before this region decides alone (the
	// floor); 0 means DefaultHomeTimeout.
	HomeTimeout time.Duration
	// MaxKeys bounds the global keys tracked; 0 means 100,000. A key past
	// the bound gets no allocation: it is decided by its floor.
	MaxKeys int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Match, when set, is the policy now in force for a key: the
	// allocator checks each tracked key's every round, and retires a key
	// whose policy is no longer global (see round). nil: never.
	Match func(key string) *limit.Policy
	// Policies, when set, is the policy set in force (policy.Holder's
	// Current): the layer keeps, for a while, the sets it replaced that
	// had global policies, so that a key one of them made global is not
	// decided as regional from a full bucket beside what the global
	// budget admitted (see scope.go). nil: only the keys this instance
	// tracked as global are emptied.
	Policies func() PolicySet
}

// PolicySet is the policy set in force as the layer reads it (a
// *policy.Set is one): a key's policy, and every policy in it.
type PolicySet interface {
	Match(key string) *limit.Policy
	All() []*limit.Policy
}

// setRef holds a PolicySet for an atomic.Pointer.
type setRef struct{ s PolicySet }

// Defaults of Config.
const (
	DefaultTick        = 100 * time.Millisecond
	DefaultHomeTimeout = 500 * time.Millisecond
	DefaultMaxKeys     = 100_000
)

// Layer decides the requests of global policies from this region's
// allocation and passes every other request to the regional store
// unchanged. It implements limit.Store (and limit.Atomic when the
// regional store does, through Store).
type Layer struct {
	inner   limit.Store
	home    Home
	region  string
	field   string // this instance's field on the boards: region/instance
	tick    time.Duration
	timeout time.Duration
	maxKeys int64
	now     func() time.Time
	match   func(key string) *limit.Policy

	policies     func() PolicySet
	seen         atomic.Pointer[setRef] // the set in force when last looked
	chmu         sync.Mutex             // serialises noteSet's writes
	changes      atomic.Pointer[[]setChange]
	changesUntil atomic.Int64 // ns: the last window of changes ends

	keys  sync.Map // key → *entry
	nkeys atomic.Int64
	pols  sync.Map // *limit.Policy → *derived
	npols atomic.Int64

	lastContact atomic.Int64 // ns of the last answer from home, 0 never
	homeDown    atomic.Bool  // the last call to home failed
	rtt         atomic.Int64 // ns, smoothed round trip to home

	st     stats
	others atomic.Pointer[map[string]*Region] // other regions, from the boards

	kick chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// derived are the policies a global policy is decided by in the region.
type derived struct {
	pool  *limit.Policy // the region's pool of claimed tokens
	floor *limit.Policy // what the region admits alone; nil for none
}

// New returns a Layer over the regional store inner and starts its
// allocator; Close stops it and gives back what the region holds.
func New(inner limit.Store, cfg Config) (*Layer, error) {
	if cfg.Region == "" || cfg.Home == nil || inner == nil {
		return nil, errors.New("region: Region, Home and the regional store are required")
	}
	if cfg.Instance == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.Instance = hex.EncodeToString(b[:])
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.HomeTimeout <= 0 {
		cfg.HomeTimeout = DefaultHomeTimeout
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	l := &Layer{inner: inner, home: cfg.Home, region: cfg.Region, field: cfg.Region + "/" + cfg.Instance,
		tick: cfg.Tick, timeout: cfg.HomeTimeout, maxKeys: int64(cfg.MaxKeys), now: cfg.Now, match: cfg.Match,
		kick: make(chan struct{}, 1), done: make(chan struct{}), policies: cfg.Policies}
	l.changes.Store(&[]setChange{})
	if l.policies != nil {
		l.seen.Store(&setRef{l.policies()})
	}
	l.wg.Add(1)
	go l.run()
	return l, nil
}

// Name returns the region's name.
func (l *Layer) Name() string { return l.region }

// Store returns l as the limiter's store: with limit.Atomic when the
// regional store has it, so RL.MTAKE stays all-or-nothing.
func (l *Layer) Store() limit.Store {
	if _, ok := l.inner.(limit.Atomic); ok {
		return atomicLayer{l}
	}
	return l
}

func (l *Layer) derive(p *limit.Policy) *derived {
	if d, ok := l.pols.Load(p); ok {
		return d.(*derived)
	}
	q := *p
	q.Algorithm, q.Scope, q.Hot, q.LocalShare, q.Space = limit.Pool, limit.ScopeRegional, limit.Hot{Mode: limit.HotOff}, 1, limit.SpacePool
	d := &derived{pool: &q, floor: p.Floor()}
	if l.npols.Add(1) > maxDerived {
		// Every reload makes new policies: forget the old ones (those in
		// use are derived again, once each).
		l.pols.Clear()
		l.npols.Store(1)
	}
	if v, loaded := l.pols.LoadOrStore(p, d); loaded {
		return v.(*derived)
	}
	return d
}

// maxDerived bounds the policies derived and kept.
const maxDerived = 4096

// Do decides reqs. Requests of global policies are taken from the
// region's pool (the tokens its allocator claimed from home); when the
// pool cannot pay and the region has no allocation to wait for (home is
// unreachable, or the key is new here), from the floor bucket. Both live
// in the regional store, so a decision never leaves the region. Every
// other request goes to the regional store unchanged.
func (l *Layer) Do(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	first := -1
	for i := range reqs {
		if p := reqs[i].Policy; p != nil && p.Global() {
			first = i
			break
		}
	}
	l.noteSet()
	if l.nkeys.Load() > 0 || l.changesUntil.Load() > 0 {
		l.scopeChanged(ctx, reqs)
	}
	if first < 0 {
		l.inner.Do(ctx, reqs, out)
		return
	}
	sub := make([]limit.Request, len(reqs))
	copy(sub, reqs)
	for i := first; i < len(sub); i++ {
		if p := sub[i].Policy; p != nil && p.Global() {
			sub[i].Policy = l.derive(p).pool
		}
	}
	l.inner.Do(ctx, sub, out)
	ns := l.now().UnixNano()
	var floors []int
	short := false
	for i := first; i < len(reqs); i++ {
		r, p := &reqs[i], reqs[i].Policy
		if p == nil || !p.Global() {
			continue
		}
		e := l.entry(r.Key, p)
		res := &out[i]
		if e != nil {
			e.demanded(r, p, res, ns)
		}
		if res.Err != nil {
			continue
		}
		res.DecidedBy = limit.ByRegion
		if e != nil {
			e.pool.Store(res.Remaining)
		}
		if res.Allowed || (r.Op != limit.OpTake && r.Op != limit.OpPeek) {
			if r.Op == limit.OpTake {
				l.st.poolAdmitted.Add(r.Cost)
			}
			continue
		}
		short = short || r.Op == limit.OpTake && r.Cost <= p.Limit
		if r.Cost <= p.Limit && l.derive(p).floor != nil && !l.allocated(e, ns) {
			floors = append(floors, i)
		}
	}
	if short {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	if len(floors) > 0 {
		l.floor(ctx, reqs, out, floors)
	}
}

// allocated reports whether a request of e may wait for its allocation:
// home answers, and a claim for e was answered. Otherwise the floor
// decides what the pool could not pay.
func (l *Layer) allocated(e *entry, ns int64) bool {
	return e != nil && e.established.Load() && l.HomeReachable(ns)
}

// HomeReachable reports whether home answered recently: its last call did
// not fail and it answered within HomeTimeout plus two ticks of ns.
func (l *Layer) HomeReachable(ns int64) bool {
	last := l.lastContact.Load()
	return !l.homeDown.Load() && last > 0 && ns-last < int64(l.timeout+2*l.tick)
}

// floor decides reqs[idx] (takes and peeks) from their floor buckets;
// what it admits is debited from home at the next claim.
func (l *Layer) floor(ctx context.Context, reqs []limit.Request, out []limit.Result, idx []int) {
	sub := make([]limit.Request, len(idx))
	res := make([]limit.Result, len(idx))
	for j, i := range idx {
		r := reqs[i]
		sub[j] = limit.Request{Key: r.Key, Cost: r.Cost, Op: r.Op, Policy: l.derive(r.Policy).floor}
	}
	l.inner.Do(ctx, sub, res)
	for j, i := range idx {
		f := res[j]
		if f.Err != nil || !f.Allowed {
			continue // the pool's rejection stands
		}
		f.DecidedBy, f.Limit = limit.ByRegion, reqs[i].Policy.Limit
		out[i] = f
		if reqs[i].Op != limit.OpTake {
			continue // a peek reports what a take would get, spending nothing
		}
		l.st.floorAdmitted.Add(reqs[i].Cost)
		if e := l.entry(reqs[i].Key, reqs[i].Policy); e != nil {
			e.floorTaken.Add(reqs[i].Cost)
		}
	}
}

// Reset forgets key: its pool and floor in the region and, for a global
// policy, its bucket at home (whose failure is reported after the
// regional state is gone).
func (l *Layer) Reset(ctx context.Context, key string, p *limit.Policy) (bool, error) {
	if p == nil || !p.Global() {
		return l.inner.Reset(ctx, key, p)
	}
	d := l.derive(p)
	existed, err := l.inner.Reset(ctx, key, d.pool)
	if err != nil {
		return false, err
	}
	if d.floor != nil {
		f, err := l.inner.Reset(ctx, key, d.floor)
		if err != nil {
			return false, err
		}
		existed = existed || f
	}
	if v, ok := l.keys.Load(key); ok {
		e := v.(*entry)
		e.pool.Store(0)
		e.floorTaken.Store(0)
	}
	hctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	h, err := l.home.Reset(hctx, key, p)
	if err != nil {
		return existed, errors.Join(errors.New("the home store did not reset the global bucket"), err)
	}
	return existed || h, nil
}

// Close stops the allocator and gives back to home the pools no other
// instance of the region is using. The regional and home stores stay
// open: they are the caller's to close, after this.
func (l *Layer) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.wg.Wait()
	})
	return nil
}

// atomicLayer is the Layer over a regional store that is limit.Atomic.
type atomicLayer struct{ *Layer }

var _ limit.Atomic = atomicLayer{}

// Group is the group of key's state as the region keeps it: for a global
// policy, its pool.
func (a atomicLayer) Group(key string, p *limit.Policy) int {
	if p != nil && p.Global() {
		p = a.derive(p).pool
	}
	return a.inner.(limit.Atomic).Group(key, p)
}

// DoAll decides all-or-nothing: global policies by their pools alone (an
// RL.MTAKE never falls to the floor).
func (a atomicLayer) DoAll(ctx context.Context, reqs []limit.Request, out []limit.Result) bool {
	a.noteSet()
	if a.nkeys.Load() > 0 || a.changesUntil.Load() > 0 {
		a.scopeChanged(ctx, reqs)
	}
	sub := make([]limit.Request, len(reqs))
	copy(sub, reqs)
	global := false
	for i := range sub {
		if p := sub[i].Policy; p != nil && p.Global() {
			sub[i].Policy = a.derive(p).pool
			global = true
		}
	}
	ok := a.inner.(limit.Atomic).DoAll(ctx, sub, out)
	if !global {
		return ok
	}
	ns := a.now().UnixNano()
	for i := range reqs {
		if p := reqs[i].Policy; p != nil && p.Global() {
			if e := a.entry(reqs[i].Key, p); e != nil && (ok || !out[i].Allowed) {
				// a member its pool could pay, refused for another
				// member, spent nothing: it is no demand
				e.demanded(&reqs[i], p, &out[i], ns)
			}
			if out[i].Err == nil {
				out[i].DecidedBy = limit.ByRegion
			}
		}
	}
	return ok
}
