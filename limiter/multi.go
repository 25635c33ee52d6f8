package limiter

import (
	"context"
	"errors"
	"sync"

	"github.com/sluice-rl/sluice/internal/tracing"
	"github.com/sluice-rl/sluice/limit"
)

// MTake decides reqs all-or-nothing (RL.MTAKE): nothing is spent unless
// every rule allows. Requests whose keys share a group of the store (one
// Redis hash slot) go to one atomic call (limit.Atomic); the groups are
// taken at once, and when any rejects, the groups that were taken are
// given back with OpReturn. Between that take and its refund, one store
// round trip, other callers can see those tokens missing: a concurrent
// request may be refused that would otherwise have passed, never the
// other way round. The hot-key path is not used.
//
// A rule whose policy is shadow is no part of the all-or-nothing: it is
// decided apart, as RL.TAKE of it alone would be (it takes when it would
// allow alone, whatever the other rules do, and is never refunded), so it
// can neither block the others nor, by sharing their atomic group, unblock
// them. Its reply is its own bucket's, with allowed 1, retry_after -1 and
// decided_by shadow.
//
// It reports whether everything was admitted. out[i] is each rule's own
// verdict: for a refused call, the rules that allowed show allowed with
// their remaining after the refund. An error (no policy, or one Redis
// returned) fails the whole call: it is returned, and nothing of the
// enforced rules is spent (a shadow rule decided apart keeps its take).
func (l *Limiter) MTake(ctx context.Context, reqs []limit.Request, out []limit.Result) (bool, error) {
	if l.tracer == nil {
		return l.mtake(ctx, reqs, out)
	}
	ctx, span := l.startDecide(ctx, len(reqs))
	span.SetAttributes(tracing.Command.String("rl.mtake"))
	ok, err := l.mtake(ctx, reqs, out)
	endDecide(span, reqs, out)
	return ok, err
}

func (l *Limiter) mtake(ctx context.Context, reqs []limit.Request, out []limit.Result) (bool, error) {
	l.stats.MTakes.Add(1)
	enforced := make([]int, 0, len(reqs))
	var shadow []int
	for i := range reqs {
		p, err := l.policyFor(&reqs[i])
		switch {
		case err != nil:
			return false, l.failed(ctx, nil, err)
		case p.Algorithm.IsConcurrency():
			return false, l.failed(ctx, p, wrongAlgorithm("rl.mtake", p))
		}
		reqs[i].Op = limit.OpTake
		if p.Shadow {
			shadow = append(shadow, i)
		} else {
			enforced = append(enforced, i)
		}
	}
	groups := l.groups(reqs, enforced)
	spent := make([]bool, len(reqs))
	dctx, cancel := l.deadline(ctx)
	jobs := make([]func(), 0, len(groups)+1)
	for _, g := range groups {
		jobs = append(jobs, func() { l.takeGroup(dctx, reqs, out, spent, g) })
	}
	if len(shadow) > 0 {
		jobs = append(jobs, func() { l.takeApart(dctx, reqs, out, shadow) })
	}
	if len(jobs) == 1 {
		jobs[0]()
	} else {
		var wg sync.WaitGroup
		for _, job := range jobs {
			wg.Go(job)
		}
		wg.Wait()
	}
	cancel()

	ok := true
	for i := range out {
		r := &out[i]
		if r.Err != nil && errors.Is(r.Err, limit.ErrUnavailable) {
			l.stats.StoreErrors.Add(1)
			l.onStoreError(ctx, &reqs[i], r)
			spent[i] = r.Allowed && byLocal(r.DecidedBy) && !reqs[i].Policy.Shadow
		}
	}
	var err error
	var errPolicy *limit.Policy
	for i := range out {
		r := &out[i]
		switch {
		case r.Err != nil:
			err, errPolicy, ok = r.Err, reqs[i].Policy, false
		case reqs[i].Policy.Shadow:
			r.Allowed, r.RetryAfterMs, r.DecidedBy = true, -1, limit.ByShadow
		case !r.Allowed:
			ok = false
		}
	}
	if !ok {
		l.refund(ctx, reqs, out, spent)
	}
	if err != nil {
		return false, l.failed(ctx, errPolicy, err)
	}
	l.count(ctx, reqs, out)
	return ok, nil
}

// failed reports the error of a refused RL.MTAKE (or RL.RELEASE) under p
// to the OnError hook and returns it.
func (l *Limiter) failed(ctx context.Context, p *limit.Policy, err error) error {
	if l.onError != nil {
		l.onError(limit.FrontOf(ctx), p, err)
	}
	return err
}

// groups splits the requests reqs[idx…] by the store's atomic groups, in
// order of first appearance; without limit.Atomic every request is its own
// group.
func (l *Limiter) groups(reqs []limit.Request, idx []int) [][]int {
	at, _ := l.store.(limit.Atomic)
	if at == nil {
		g := make([][]int, len(idx))
		for j, i := range idx {
			g[j] = []int{i}
		}
		return g
	}
	var groups [][]int
	index := map[int]int{}
	for _, i := range idx {
		id := at.Group(reqs[i].Key, reqs[i].Policy)
		j, seen := index[id]
		if !seen {
			j = len(groups)
			index[id] = j
			groups = append(groups, nil)
		}
		groups[j] = append(groups[j], i)
	}
	return groups
}

// takeApart takes the requests reqs[idx…] one by one in one store batch,
// as RL.TAKE of each alone would: the shadow rules of an RL.MTAKE, which
// are no part of its all-or-nothing.
func (l *Limiter) takeApart(ctx context.Context, reqs []limit.Request, out []limit.Result, idx []int) {
	sub, res := pick(reqs, idx)
	l.store.Do(ctx, sub, res)
	for j, i := range idx {
		out[i] = res[j]
	}
}

// takeGroup takes one group: with DoAll when the store is limit.Atomic,
// even a group of one, so that an RL.MTAKE is decided the same way however
// its keys fall into slots (a region decides its global keys by their
// pools alone, never its floor, as docs/regions.md says); else alone with Do.
func (l *Limiter) takeGroup(ctx context.Context, reqs []limit.Request, out []limit.Result, spent []bool, g []int) {
	sub, res := pick(reqs, g)
	all := false
	if _, atomic := l.store.(limit.Atomic); len(g) == 1 && !atomic {
		l.store.Do(ctx, sub, res)
		all = res[0].Err == nil && res[0].Allowed
	} else {
		all = l.store.(limit.Atomic).DoAll(ctx, sub, res)
	}
	for j, i := range g {
		out[i] = res[j]
		spent[i] = all
	}
}

// byLocal reports whether a decision was made by the in-process bucket of
// the fallback, for a store failure or an overload.
func byLocal(decidedBy string) bool {
	return decidedBy == limit.ByFallbackLocal || decidedBy == limit.ByOverloadLocal
}

// refund gives back every take of a refused MTAKE, in one store batch (and
// one of the fallback store, for takes it made), and reports each rule's
// state after it.
func (l *Limiter) refund(ctx context.Context, reqs []limit.Request, out []limit.Result, spent []bool) {
	for _, fallback := range []bool{false, true} {
		var back []limit.Request
		var idx []int
		for i := range reqs {
			if spent[i] && byLocal(out[i].DecidedBy) == fallback {
				r := reqs[i]
				r.Op, r.Window = limit.OpReturn, out[i].Window // given back to the window it was taken in
				if fallback {
					r.Policy = r.Policy.Share()
				}
				back = append(back, r)
				idx = append(idx, i)
			}
		}
		if len(back) == 0 {
			continue
		}
		res := make([]limit.Result, len(back))
		store := l.store
		if fallback {
			store = l.fallback
		}
		dctx, cancel := l.deadline(ctx)
		store.Do(dctx, back, res)
		cancel()
		for j, i := range idx {
			if res[j].Err != nil {
				l.stats.RefundFails.Add(1)
				l.corrected(ctx, reqs[i].Policy, CorrectionRefundFailed, out[i].DecidedBy, 0)
				continue
			}
			l.stats.Refunds.Add(1)
			l.corrected(ctx, reqs[i].Policy, CorrectionRefund, out[i].DecidedBy, reqs[i].Cost)
			if l.deny != nil && !fallback {
				l.deny.Forget(reqs[i].Key, reqs[i].Policy) // the give-back may admit what it refused
			}
			out[i].Remaining, out[i].ResetAfterMs = res[j].Remaining, res[j].ResetAfterMs
		}
	}
}
