package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-rl/sluice/limit"
)

// The take path: RL.TAKE and RL.PEEK (limit.OpTake, limit.OpPeek), and
// CL.THROTTLE, a take under the policy ThrottlePolicy makes. Decide is the
// door of RL.ADJUST too (adjust.go): a pipeline mixes takes and adjusts,
// and they go to the store together, as one batch.

// Decide decides a batch of takes, peeks and adjusts, in any mix, in three
// steps: each request is checked by its operation's path (checkTake here,
// checkAdjust in adjust.go); every request that passed goes to the store
// in one call (decide.go: hot-key path, deny cache, store, failure and
// overload policy, shadow); each answer is finished and counted by its
// operation's path. reqs[i].Policy, unless the caller set it, is filled in
// with the key's policy; out[i] gets the decision or an error
// (limit.ErrNoPolicy, a refused check, or an error Redis returned).
func (l *Limiter) Decide(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	var span trace.Span // nil: tracing off
	if l.tracer != nil {
		ctx, span = l.startDecide(ctx, len(reqs))
	}
	var shown []string // the receipts the clients see; nil when no take asked for one
	n := 0             // requests that passed their checks
	for i := range reqs {
		r := &reqs[i]
		p, err := l.policyFor(r)
		var receipt string
		switch {
		case err != nil:
		case r.Op == limit.OpAdjust:
			err = checkAdjust(r, p)
		default:
			receipt, err = checkTake(r, p)
		}
		if receipt != "" {
			if shown == nil {
				shown = make([]string, len(reqs))
			}
			shown[i] = receipt
		}
		out[i] = limit.Result{Err: err}
		if err == nil {
			n++
		}
	}
	l.decide(ctx, reqs, out, n)
	front := l.front(ctx)
	for i := range reqs {
		r, res := &reqs[i], &out[i]
		switch {
		case res.Err != nil:
			l.countError(front, r.Policy, res.Err)
		case r.Op == limit.OpAdjust:
			l.adjusted(front, r, res)
		default:
			if shown != nil && shown[i] != "" && res.Receipt != "" {
				// The client is shown its receipt, not the bound id the
				// store recorded.
				res.Receipt = shown[i]
			}
			l.countDecision(front, r.Policy, res)
		}
	}
	if span != nil {
		endDecide(span, reqs, out)
	}
}

// policyFor fills in r.Policy with its key's policy, unless the caller set
// it (CL.THROTTLE), and returns it: limit.ErrNoPolicy when none matches.
func (l *Limiter) policyFor(r *limit.Request) (*limit.Policy, error) {
	if r.Policy == nil {
		r.Policy = l.policies.Match(r.Key)
	}
	if r.Policy == nil {
		return nil, fmt.Errorf("%w '%s'", limit.ErrNoPolicy, r.Key)
	}
	return r.Policy, nil
}

// wrongAlgorithm is the error of command cmd on policy p of the other kind:
// a rate command on a concurrency policy, or the other way round.
func wrongAlgorithm(cmd string, p *limit.Policy) error {
	return &limit.AlgorithmError{Command: cmd, Policy: p.Name, Algorithm: p.Algorithm}
}

// checkTake checks a take or a peek under its policy p: a rate one. A
// take that asks for a receipt (WantReceipt) under a policy whose takes
// carry them (limit.Policy.Receipted) gets a new one, bound to r.User for
// the store; checkTake returns the receipt its client is shown ("" for
// none).
//
// Receipts (docs/receipts.md): the store records the bound id with the
// take, in one atomic step, and names it in Result.Receipt when it
// admits; the client is shown the receipt, the store keeps only the bound
// id (limit.BindReceipt), so another user's give-back of it is an unknown
// receipt. Such a take skips the hot-key path (it is still counted as
// traffic there): a lease or a sub-bucket could not record it, and its
// give-back goes to the main bucket. A take answered without the store (a
// fallback, overload, the deny cache's refusal) carries no receipt:
// nothing to give back, which only under-admits.
func checkTake(r *limit.Request, p *limit.Policy) (string, error) {
	switch {
	case p.Algorithm.IsConcurrency(): // RL.ACQUIRE's policy (concurrency.go)
		cmd := "rl.take"
		if r.Op == limit.OpPeek {
			cmd = "rl.peek"
		}
		return "", wrongAlgorithm(cmd, p)
	case r.Op != limit.OpTake || !r.WantReceipt:
		return "", nil
	}
	r.Receipt = ""
	if !p.Receipted() || r.Cost <= 0 {
		return "", nil
	}
	shown := limit.NewReceipt()
	r.Receipt = limit.BindReceipt(r.User, shown)
	return shown, nil
}

// throttleKey names a CL.THROTTLE policy: its arguments and the policy
// of the key it borrows on_store_error from.
type throttleKey struct {
	base                    *limit.Policy
	maxBurst, count, period int64
}

// maxThrottlePolicies bounds the CL.THROTTLE policies kept; past it the
// table starts again.
const maxThrottlePolicies = 4096

// ThrottlePolicy returns the GCRA policy of CL.THROTTLE key max_burst count
// period (seconds), as redis-cell defines it: a burst of max_burst+1 and
// count per period. It needs no policy in the config; when one matches the
// key, its name, on_store_error, local_share, shadow and deny_cache apply, else
// on_store_error is closed. Equal arguments give the same *limit.Policy,
// so the store's per-policy caches work. The door then decides the take
// with Decide, the policy set in its request.
func (l *Limiter) ThrottlePolicy(key string, maxBurst, count, period int64) (*limit.Policy, error) {
	base := l.policies.Match(key)
	k := throttleKey{base, maxBurst, count, period}
	if p, ok := l.throttle.Load(k); ok {
		return p.(*limit.Policy), nil
	}
	if maxBurst < 0 || maxBurst >= limit.MaxScaled || count < 1 || count >= limit.MaxScaled || period < 1 || period > int64(24*time.Hour/time.Second)*365 {
		return nil, errors.New("max_burst must be >= 0, count and period positive (period at most a year)")
	}
	p := &limit.Policy{Name: "cl.throttle", Match: key, Algorithm: limit.GCRA, Limit: maxBurst + 1,
		Rate: count, Period: time.Duration(period) * time.Second, OnStoreError: limit.FailClosed, Space: limit.SpaceThrottle}
	if base != nil {
		p.Name, p.OnStoreError, p.LocalShare, p.Shadow, p.NoDenyCache = base.Name, base.OnStoreError, base.LocalShare, base.Shadow, base.NoDenyCache
	}
	if _, err := p.Bucket(); err != nil {
		return nil, err
	}
	if l.throttleSize.Add(1) > maxThrottlePolicies {
		l.throttle.Clear()
		l.throttleSize.Store(1)
	}
	l.throttle.Store(k, p)
	return p, nil
}
