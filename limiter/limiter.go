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
// hotkey.Deny implements it.
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
	// Timeout is the deadline of every store call; 0 means 50ms.
	Timeout func() time.Duration
	// Hot is the hot-key path (package hotkey); nil means none: every
	// request goes to the store.
	Hot HotPath
	// Deny is the deny cache; nil means none.
	Deny DenyCache
	// ClosedRetryAfter is the retry_after of a fallback-closed reject; 0
	// means 1s, the circuit breaker's default cool-down.
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
		l.timeout = func() time.Duration { return 50 * time.Millisecond }
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

// Decide decides a batch. reqs[i].Policy, unless the caller set it, is
// filled in with the key's policy; out[i] gets the
// decision or an error (limit.ErrNoPolicy, or an error Redis returned).
func (l *Limiter) Decide(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	var span trace.Span // nil: tracing off
	if l.tracer != nil {
		ctx, span = l.startDecide(ctx, len(reqs))
	}
	n := 0
	var shown []string // the receipts the clients see (adjust.go); nil when no take asked for one
	for i := range reqs {
		p := reqs[i].Policy // set by the caller for CL.THROTTLE
		if p == nil {
			p = l.policies.Match(reqs[i].Key)
			reqs[i].Policy = p
		}
		if p == nil {
			out[i] = limit.Result{Err: fmt.Errorf("%w '%s'", limit.ErrNoPolicy, reqs[i].Key)}
			continue
		}
		if p.Algorithm.IsConcurrency() { // RL.ACQUIRE's policy (concurrency.go)
			out[i], reqs[i].Policy = limit.Result{Err: wrongAlgorithm(reqs[i].Op, p)}, nil
			continue
		}
		if err := notAdjustable(&reqs[i]); err != nil {
			out[i] = limit.Result{Err: err}
			continue
		}
		if reqs[i].WantReceipt || reqs[i].Op == limit.OpAdjust { // adjust.go
			r, err := receiptOf(&reqs[i])
			if err != nil {
				out[i] = limit.Result{Err: err}
				reqs[i].Policy = nil // not decided: decideSome skips it
				continue
			}
			if r != "" {
				if shown == nil {
					shown = make([]string, len(reqs))
				}
				shown[i] = r
			}
		}
		n++
	}
	switch {
	case n == 0:
	case n < len(reqs):
		l.decideSome(ctx, reqs, out)
	default:
		l.decide(ctx, reqs, out)
	}
	showReceipts(shown, out)
	l.count(ctx, reqs, out)
	if span != nil {
		endDecide(span, reqs, out)
	}
}

// decideSome decides the requests that have a policy when others have none.
func (l *Limiter) decideSome(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	sub := make([]limit.Request, 0, len(reqs))
	idx := make([]int, 0, len(reqs))
	for i := range reqs {
		if reqs[i].Policy != nil && notAdjustable(&reqs[i]) == nil {
			sub = append(sub, reqs[i])
			idx = append(idx, i)
		}
	}
	res := make([]limit.Result, len(sub))
	l.decide(ctx, sub, res)
	for j, i := range idx {
		out[i] = res[j]
	}
}

func (l *Limiter) decide(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	hot := l.hotIndexes(reqs)
	var cached []bool // answered by the deny cache; nil when none was
	var sent time.Time
	var gen uint64
	n := len(reqs) // requests left to decide
	if l.deny != nil {
		sent, gen = time.Now(), l.deny.Gen()
		cached, n = l.denied(reqs, out, hot, sent)
	}
	if n > 0 {
		dctx, cancel := l.deadline(ctx)
		if hot == nil && cached == nil {
			l.store.Do(dctx, reqs, out)
		} else {
			l.decideHot(dctx, reqs, out, hot, cached)
		}
		cancel()
	}
	if l.deny != nil {
		l.refused(reqs, out, hot, cached, sent, gen)
		l.forgetGivenBack(reqs, out)
	}
	for i := range out {
		if out[i].Err != nil && errors.Is(out[i].Err, limit.ErrUnavailable) {
			l.stats.StoreErrors.Add(1)
			l.onStoreError(ctx, &reqs[i], &out[i])
		}
		if reqs[i].Policy.Shadow && out[i].Err == nil {
			out[i].Allowed = true
			out[i].RetryAfterMs = -1
			out[i].DecidedBy = limit.ByShadow
		}
	}
}

// denyable reports whether r's refusals may enter the deny cache and be
// answered from it: a take or a peek of a regional policy that is neither
// shadow nor opted out (deny_cache: false). A global policy's pool is
// refilled by its region's allocator, whenever: a refusal of it says
// nothing of the next second.
func denyable(r *limit.Request) bool {
	p := r.Policy
	return (r.Op == limit.OpTake || r.Op == limit.OpPeek) && !p.Shadow && !p.NoDenyCache && !p.Global() && r.Cost > 0
}

// denied answers from the deny cache the cold requests it can, and
// returns which (nil when none) and how many requests are left.
func (l *Limiter) denied(reqs []limit.Request, out []limit.Result, hot []int, now time.Time) ([]bool, int) {
	var cached []bool
	left := len(reqs)
	for i, j := 0, 0; i < len(reqs); i++ {
		if j < len(hot) && hot[j] == i {
			j++
			continue
		}
		if !denyable(&reqs[i]) {
			continue
		}
		if r, ok := l.deny.Lookup(reqs[i].Key, reqs[i].Policy, reqs[i].Cost, now); ok {
			if cached == nil {
				cached = make([]bool, len(reqs))
			}
			cached[i], out[i] = true, r
			left--
		}
	}
	return cached, left
}

// refused records in the deny cache the refusals the store itself gave
// to the cold requests, sent at sent: never a lease's or a sub-bucket's,
// a fallback's or an overload's (those are not the store's word).
func (l *Limiter) refused(reqs []limit.Request, out []limit.Result, hot []int, cached []bool, sent time.Time, gen uint64) {
	for i, j := 0, 0; i < len(reqs); i++ {
		if j < len(hot) && hot[j] == i {
			j++
			continue
		}
		r := &out[i]
		if (cached != nil && cached[i]) || r.Err != nil || r.Allowed || r.DecidedBy != limit.ByStore || !denyable(&reqs[i]) {
			continue
		}
		l.deny.Refused(reqs[i].Key, reqs[i].Policy, reqs[i].Cost, r, sent, gen)
	}
}

// hotIndexes counts every request of a policy with a hot mode and returns
// the indexes of those whose key is hot now, or nil: a policy without one
// costs one field test per request. In process (the embedded store) only a
// hot mode the config names applies: the default (limit.Hot.Default) is
// there to spare a shard, and there is none.
func (l *Limiter) hotIndexes(reqs []limit.Request) []int {
	if l.hot == nil {
		return nil
	}
	var hot []int
	var now time.Time
	for i := range reqs {
		p := reqs[i].Policy
		if (p.Hot.Mode != limit.HotLease && p.Hot.Mode != limit.HotSplit) || (p.Hot.Default && l.inProcess) {
			continue
		}
		if reqs[i].Op == limit.OpAdjust {
			continue // an adjust goes to the main bucket, and is no traffic
		}
		if now.IsZero() {
			now = time.Now()
		}
		if reqs[i].Receipt != "" {
			l.hot.Observe(reqs[i].Key, p, now) // traffic, but decided on the main bucket, which records its receipt
			continue
		}
		if l.hot.Observe(reqs[i].Key, p, now) {
			hot = append(hot, i)
		}
	}
	return hot
}

// decideHot sends the hot requests to the hot-key path and the rest to the
// store, the two at once; the requests cached marks (when not nil) are
// answered already, by the deny cache, and go to neither.
func (l *Limiter) decideHot(ctx context.Context, reqs []limit.Request, out []limit.Result, hot []int, cached []bool) {
	hreqs, hout := pick(reqs, hot)
	rest := make([]limit.Request, 0, len(reqs)-len(hot))
	idx := make([]int, 0, len(reqs)-len(hot))
	for i, j := 0, 0; i < len(reqs); i++ {
		if j < len(hot) && hot[j] == i {
			j++
			continue
		}
		if cached == nil || !cached[i] {
			rest = append(rest, reqs[i])
			idx = append(idx, i)
		}
	}
	rout := make([]limit.Result, len(rest))
	switch {
	case len(hot) == 0 && len(rest) == 0:
	case len(hot) == 0:
		l.store.Do(ctx, rest, rout)
	case len(rest) == 0:
		l.hot.Decide(ctx, hreqs, hout)
	default:
		done := make(chan struct{})
		go func() {
			l.hot.Decide(ctx, hreqs, hout)
			close(done)
		}()
		l.store.Do(ctx, rest, rout)
		<-done
	}
	for j, i := range idx {
		out[i] = rout[j]
	}
	for j, i := range hot {
		out[i] = hout[j]
	}
}

// onStoreError applies the policy's on_store_error to one request whose
// store call failed for connectivity, or its overload mode (on_overload)
// when the store was answering but had no room for it in time.
func (l *Limiter) onStoreError(ctx context.Context, r *limit.Request, res *limit.Result) {
	p := r.Policy
	mode, open, closed, share := p.OnStoreError, limit.ByFallbackOpen, limit.ByFallbackClosed, limit.ByFallbackLocal
	if errors.Is(res.Err, limit.ErrOverload) {
		mode, open, closed, share = p.OverloadMode(), limit.ByOverloadOpen, limit.ByOverloadClosed, limit.ByOverloadLocal
	}
	if givesBack(r) {
		// Its receipt is in the store: nothing can be given back without
		// it, in any mode (adjust.go).
		by := closed
		switch mode {
		case limit.FailOpen:
			by = open
		case limit.FailLocal:
			by = share
		}
		*res = limit.Result{Limit: p.Limit, RetryAfterMs: -1, DecidedBy: by}
		return
	}
	switch mode {
	case limit.FailOpen:
		// Nothing is known of the bucket: report it as untouched.
		*res = limit.Result{Allowed: true, Limit: p.Limit, Remaining: p.Limit, RetryAfterMs: -1, DecidedBy: open}
	case limit.FailLocal:
		// Fallback and overload share this instance's local bucket of
		// the key: it is one share, however it came to be used.
		q := *r
		q.Policy = p.Share()
		q.Receipt, q.WantReceipt = "", false // a fallback's take has nothing to give back
		var one [1]limit.Result
		l.fallback.Do(ctx, []limit.Request{q}, one[:])
		*res = one[0]
		res.DecidedBy = share
	default: // closed, and any unset value: never admit by accident
		retry := int64(-1)
		if r.Cost <= p.Limit {
			retry = l.closedRetry.Milliseconds()
		}
		*res = limit.Result{Allowed: false, Limit: p.Limit, Remaining: 0, RetryAfterMs: retry, DecidedBy: closed}
	}
}

// count records the results of reqs in the counters and the hooks.
func (l *Limiter) count(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	front := ""
	if l.onDecision != nil || l.onError != nil || l.onCorrection != nil {
		front = limit.FrontOf(ctx)
	}
	for i := range out {
		r := &out[i]
		switch {
		case r.Err != nil:
			l.stats.Errors.Add(1)
			if l.onError != nil {
				l.onError(front, l.policyOf(&reqs[i], r.Err), r.Err)
			}
			continue
		case reqs[i].Op == limit.OpAdjust:
			l.adjusted(front, &reqs[i], r)
			continue
		case r.Allowed:
			l.stats.Allowed.Add(1)
		default:
			l.stats.Rejected.Add(1)
		}
		l.stats.Decisions.Add(1)
		if l.onDecision != nil {
			l.onDecision(front, reqs[i].Policy, r)
		}
		for j, p := range paths {
			if p == r.DecidedBy {
				l.stats.ByPath[j].Add(1)
				break
			}
		}
	}
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

// deadline is ctx with the store timeout, detached from ctx's cancellation:
// every connection's calls share the server's context, and a deadline under
// it would register with it, one lock for the whole server per batch. A
// call still ends by its timeout, which is short; ctx's values are kept.
//
// The in-process store never waits, so it gets ctx as it is: the timer of a
// deadline was about a tenth of the embedded mode's CPU at pipeline 1
// (six allocations and a runtime timer added and removed per batch).
func (l *Limiter) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.inProcess {
		return ctx, noCancel
	}
	return context.WithTimeout(context.WithoutCancel(ctx), l.timeout())
}

// noCancel is the CancelFunc of a context that needs none.
func noCancel() {}

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
