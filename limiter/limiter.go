package limiter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// Matcher finds the policy of a key; nil when none matches. policy.Holder
// satisfies it through a small adapter in app/policy.go; tests pass a func.
type Matcher interface {
	Match(key string) *limit.Policy
}

// MatcherFunc adapts a function to Matcher.
type MatcherFunc func(key string) *limit.Policy

// Match calls f.
func (f MatcherFunc) Match(key string) *limit.Policy { return f(key) }

// HotPath detects hot keys and decides their requests (leases, split
// buckets); hotkey.Layer implements it.
type HotPath interface {
	// Observe counts a request and reports whether its key is hot now.
	Observe(key string, p *limit.Policy, now time.Time) bool
	// Decide decides requests whose key is hot; a connectivity failure
	// comes back as limit.ErrUnavailable, for on_store_error.
	Decide(ctx context.Context, reqs []limit.Request, out []limit.Result)
	// Reset forgets key's hot state for RL.RESET, after the store has
	// reset the key: on this instance, and the key's hot buckets in the
	// store. It reports whether any of those existed.
	Reset(ctx context.Context, key string, p *limit.Policy) (bool, error)
}

// DenyCache answers, on this instance, requests the store refused a moment
// ago and would refuse again (docs/hotkeys.md, "The deny cache");
// denycache.Cache implements it.
type DenyCache interface {
	// Lookup answers a request of cost for key under p at now, reporting
	// whether it did; the answer is a refusal, decided_by deny-cache.
	Lookup(key string, p *limit.Policy, cost int64, now time.Time) (limit.Result, bool)
	// Gen is read with the time before the store call whose refusal
	// Refused records.
	Gen() uint64
	// Refused records the store's refusal r of a request sent at sent.
	Refused(key string, p *limit.Policy, cost int64, r *limit.Result, sent time.Time, gen uint64)
	// Forget drops the refusal of key under p: RL.RESET, or a give-back
	// on this instance.
	Forget(key string, p *limit.Policy)
}

// InProcessStore is a store that may decide in this process, never
// waiting on a network (local.Store): when InProcess reports true, its
// calls get no deadline, a policy's default hot mode does not apply (there
// is no shard to spare), and the fallback's slots are not counted against
// its answers (it never fails over to the fallback).
type InProcessStore interface {
	InProcess() bool
}

var _ InProcessStore = (*local.Store)(nil)

// Config configures a Limiter.
type Config struct {
	// Policies maps keys to policies (required).
	Policies Matcher
	// Store decides (required).
	Store limit.Store
	// Timeout is the deadline of every store call, asked for each; nil
	// means limit.DefaultTimeout.
	Timeout func() time.Duration
	// Hot is the hot-key path (package hotkey); nil means none: every
	// request goes to the store.
	Hot HotPath
	// Deny is the deny cache; nil means none.
	Deny DenyCache
	// ClosedRetryAfter is the retry_after of a fallback-closed reject; 0
	// means 1s, the default cool-down of the store's circuit breakers
	// (cluster/breaker.go).
	ClosedRetryAfter time.Duration
	// Fallback is the in-process store of the `local` failure policy; nil
	// means a new local.Store labelled fallback-local.
	Fallback limit.Store
	// OnDecision, when set, is called once per decided request with its
	// policy and its final result (r.Err is nil), after the failure policy
	// and shadow mode. It runs on the hot path, from many goroutines: it
	// must be fast, safe for concurrent use, and keep neither pointer.
	OnDecision func(front string, p *limit.Policy, r *limit.Result)
	// OnError, when set, is called once per request answered with an error
	// (no policy, an error Redis returned, a malformed reply, a refused
	// receipt …) with the key's policy, nil when none matched; the same
	// rules as OnDecision apply.
	OnError func(front string, p *limit.Policy, err error)
	// OnCorrection, when set, is called once per correction of what was
	// spent (corrections.go): an RL.ADJUST, a refund of a refused
	// RL.MTAKE's take, an RL.RELEASE. The same rules as OnDecision apply.
	OnCorrection func(front string, p *limit.Policy, kind, decidedBy string, tokens int64)
	// Slots holds RL.ACQUIRE's slots (concurrency.go); nil means Store,
	// when it is a limit.SlotStore. A Store that wraps another (a region's
	// layer) passes the store under it here.
	Slots limit.SlotStore
	// Tracer, when set, gives every Decide a span (trace.go); nil, the
	// default, is tracing off, and Decide then costs what it did before.
	Tracer trace.Tracer
}

// Limiter is the decision path. It is safe for concurrent use.
type Limiter struct {
	policies Matcher
	store    limit.Store
	timeout  func() time.Duration
	fallback limit.Store
	hot      HotPath
	deny     DenyCache
	stats    Stats

	onDecision   func(string, *limit.Policy, *limit.Result)
	onError      func(string, *limit.Policy, error)
	onCorrection func(string, *limit.Policy, string, string, int64)

	closedRetry time.Duration
	inProcess   bool // the store is an InProcessStore, which never waits: no deadline

	throttle     sync.Map // throttleKey → *limit.Policy
	throttleSize atomic.Int64

	slots     slotStats       // RL.ACQUIRE and RL.RELEASE (concurrency.go)
	slotStore limit.SlotStore // nil: none
	orphans   orphans         // slots the store may hold that no caller knows (orphans.go)
	tracer    trace.Tracer    // nil: tracing off
}

// Stats are the Limiter's counters, read with Snapshot.
type Stats struct {
	Decisions   atomic.Int64
	Allowed     atomic.Int64
	Rejected    atomic.Int64
	Errors      atomic.Int64
	StoreErrors atomic.Int64 // connectivity failures sent to on_store_error
	MTakes      atomic.Int64 // RL.MTAKE calls
	Refunds     atomic.Int64 // takes of a refused RL.MTAKE given back
	RefundFails atomic.Int64 // refunds the store could not make (tokens lost, never over-admitted)
	ByPath      [len(paths)]atomic.Int64
	Adjust      AdjustStats // RL.ADJUST, apart from the decisions above
}

var paths = [...]string{limit.ByStore, limit.ByLease, limit.BySplit, limit.ByEmbedded,
	limit.ByFallbackOpen, limit.ByFallbackClosed, limit.ByFallbackLocal,
	limit.ByOverloadOpen, limit.ByOverloadClosed, limit.ByOverloadLocal, limit.ByShadow, limit.ByRegion, limit.ByDenyCache}

// New validates cfg and returns a Limiter.
func New(cfg Config) (*Limiter, error) {
	if cfg.Policies == nil || cfg.Store == nil {
		return nil, errors.New("limiter: Policies and Store are required")
	}
	l := &Limiter{policies: cfg.Policies, store: cfg.Store, timeout: cfg.Timeout, fallback: cfg.Fallback, hot: cfg.Hot, deny: cfg.Deny, closedRetry: cfg.ClosedRetryAfter,
		onDecision: cfg.OnDecision, onError: cfg.OnError, onCorrection: cfg.OnCorrection, tracer: cfg.Tracer}
	if l.closedRetry < time.Millisecond {
		l.closedRetry = time.Second
	}
	if l.timeout == nil {
		l.timeout = func() time.Duration { return limit.DefaultTimeout }
	}
	if l.fallback == nil {
		l.fallback = local.New(local.Config{DecidedBy: limit.ByFallbackLocal})
	}
	if ip, ok := cfg.Store.(InProcessStore); ok {
		l.inProcess = ip.InProcess()
	}
	l.slotStore = cfg.Slots
	if ss, ok := cfg.Store.(limit.SlotStore); ok && l.slotStore == nil {
		l.slotStore = ss
	}
	return l, nil
}

// Reset forgets the state of key (RL.RESET) in the store, in the
// fallback and, for a hot key, on the hot-key path: its split sub-buckets
// in the store, its lease and hot state here. The store goes first, so a
// lease claimed meanwhile is dropped with the rest (an under-admission of
// one block at most, never an over-admission). It reports whether the key
// or one of its sub-buckets existed; the error is the store's, else the
// hot path's, and this instance's state is cleared either way, its deny
// cache entry of the key included.
func (l *Limiter) Reset(ctx context.Context, key string) (bool, error) {
	p := l.policies.Match(key)
	if p == nil {
		return false, fmt.Errorf("%w '%s'", limit.ErrNoPolicy, key)
	}
	_, _ = l.fallback.Reset(ctx, key, p)
	dctx, cancel := l.deadline(ctx)
	defer cancel()
	existed, err := l.store.Reset(dctx, key, p)
	if l.deny != nil {
		l.deny.Forget(key, p) // after the store: a refusal sent before the reset is not kept
	}
	if l.hot != nil {
		hot, herr := l.hot.Reset(dctx, key, p)
		existed = existed || hot
		if err == nil {
			err = herr
		}
	}
	return existed, err
}

// Snapshot is a copy of the counters.
type Snapshot struct {
	Decisions, Allowed, Rejected, Errors, StoreErrors int64
	MTakes, Refunds, RefundFails                      int64
	ByPath                                            map[string]int64
	Adjusts, AdjustSpent, AdjustReturned              int64 // see AdjustStats
}

// Snapshot returns the counters now.
func (l *Limiter) Snapshot() Snapshot {
	s := Snapshot{
		Decisions: l.stats.Decisions.Load(), Allowed: l.stats.Allowed.Load(),
		Rejected: l.stats.Rejected.Load(), Errors: l.stats.Errors.Load(),
		StoreErrors: l.stats.StoreErrors.Load(), ByPath: map[string]int64{},
		MTakes: l.stats.MTakes.Load(), Refunds: l.stats.Refunds.Load(), RefundFails: l.stats.RefundFails.Load(),
		Adjusts: l.stats.Adjust.Calls.Load(), AdjustSpent: l.stats.Adjust.Spent.Load(), AdjustReturned: l.stats.Adjust.Returned.Load(),
	}
	for i, p := range paths {
		s.ByPath[p] = l.stats.ByPath[i].Load()
	}
	return s
}
