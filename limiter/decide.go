package limiter

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// The store call of Decide's takes and adjusts (take.go, adjust.go), whose
// deadline, failure policy and counting RL.MTAKE (multi.go) and
// RL.ACQUIRE (concurrency.go) share too: a batch of checked requests
// goes to the hot-key path, the deny cache and the store together, once;
// the failure and overload policy and shadow mode apply to the answers;
// the counters and hooks hear each result. What differs by operation
// here is what the store call itself must know: an adjust never takes the
// hot-key path nor enters the deny cache, a give-back it made drops the
// key's refusal from the deny cache, and a give-back the store could not
// answer gives nothing back in any failure mode.

// decide decides the n requests of reqs that passed their checks (out[i].Err
// nil) in one store call (decideAll); the others keep their error.
func (l *Limiter) decide(ctx context.Context, reqs []limit.Request, out []limit.Result, n int) {
	switch {
	case n == 0:
	case n == len(reqs):
		l.decideAll(ctx, reqs, out)
	default:
		idx := make([]int, 0, n)
		for i := range out {
			if out[i].Err == nil {
				idx = append(idx, i)
			}
		}
		sub, res := pick(reqs, idx)
		l.decideAll(ctx, sub, res)
		for j, i := range idx {
			out[i] = res[j]
		}
	}
}

// decideAll decides every request of reqs, all checked, in one call of
// each layer: the hot ones on the hot-key path, the refusals it can on the
// deny cache, the rest in the store; then the failure or overload policy
// of those whose store could not answer, and shadow mode.
func (l *Limiter) decideAll(ctx context.Context, reqs []limit.Request, out []limit.Result) {
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

// forgetGivenBack drops from the deny cache the keys a give-back of reqs
// credited in the store: the tokens it gave back may admit what was
// refused.
func (l *Limiter) forgetGivenBack(reqs []limit.Request, out []limit.Result) {
	for i := range reqs {
		if givesBack(&reqs[i]) && out[i].Err == nil {
			l.deny.Forget(reqs[i].Key, reqs[i].Policy)
		}
	}
}

// pick returns the requests reqs[idx…], and room for their results.
func pick(reqs []limit.Request, idx []int) ([]limit.Request, []limit.Result) {
	sub := make([]limit.Request, len(idx))
	for j, i := range idx {
		sub[j] = reqs[i]
	}
	return sub, make([]limit.Result, len(idx))
}

// front is the door of ctx (limit.FrontOf) when a hook will hear it, else
// "": the lookup is spared when there is no hook.
func (l *Limiter) front(ctx context.Context) string {
	if l.onDecision != nil || l.onError != nil || l.onCorrection != nil {
		return limit.FrontOf(ctx)
	}
	return ""
}

// count records the results of reqs, takes (RL.MTAKE, RL.ACQUIRE), in the
// counters and the hooks.
func (l *Limiter) count(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	front := l.front(ctx)
	for i := range out {
		if out[i].Err != nil {
			l.countError(front, reqs[i].Policy, out[i].Err)
		} else {
			l.countDecision(front, reqs[i].Policy, &out[i])
		}
	}
}

// countError counts one request answered with err under p (nil: no
// policy matched).
func (l *Limiter) countError(front string, p *limit.Policy, err error) {
	l.stats.Errors.Add(1)
	if l.onError != nil {
		l.onError(front, p, err)
	}
}

// countDecision counts one decision r under p.
func (l *Limiter) countDecision(front string, p *limit.Policy, r *limit.Result) {
	if r.Allowed {
		l.stats.Allowed.Add(1)
	} else {
		l.stats.Rejected.Add(1)
	}
	l.stats.Decisions.Add(1)
	if l.onDecision != nil {
		l.onDecision(front, p, r)
	}
	for j, by := range paths {
		if by == r.DecidedBy {
			l.stats.ByPath[j].Add(1)
			break
		}
	}
}
