package hotkey

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// Decide decides a batch of requests whose keys Observe reported hot; every
// reqs[i].Policy is set. out[i] gets the decision, or the store's error in
// Err (errors.Is(err, limit.ErrUnavailable) for connectivity, so that the
// limiter applies on_store_error). It makes at most one store call per
// round: the claims, split first tries and pass-through requests of the
// batch go together, split second tries in a second call; a request that
// waited for another goroutine's claim or split hand-over starts a later
// round. The first split decision of a key after it turned hot on this
// instance first hands the main bucket's budget over to the sub-buckets
// (see handoff), in two more rounds, under ctx; the key's other requests
// on this instance wait for it, bounded by their context.
//
// Takes under mode lease are answered from leased tokens (decided_by
// lease); takes and peeks under mode split from a sub-bucket (decided_by
// split). Everything else — other ops, other modes, a cost above the limit
// of a lease, a policy the store would refuse, any request after Close —
// goes to the store unchanged.
func (h *Layer) Decide(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	b := batch{h: h, ctx: ctx, reqs: reqs, out: out}
	ns := h.now().UnixNano()
	for i := range reqs {
		r := &reqs[i]
		switch {
		case r.Policy == nil:
			out[i] = limit.Result{Err: fmt.Errorf("%w '%s'", limit.ErrNoPolicy, r.Key)}
		case h.closed.Load():
			b.pass(i)
		case r.Op == limit.OpTake && r.Policy.Hot.Mode == limit.HotLease && r.Cost >= 1 && r.Cost <= r.Policy.Limit:
			b.lease(i, ns, noGen)
		case (r.Op == limit.OpTake || r.Op == limit.OpPeek) && r.Policy.Hot.Mode == limit.HotSplit && r.Cost >= 1:
			b.split(i)
		default:
			b.pass(i)
		}
	}
	for {
		for len(b.call.reqs) > 0 {
			b.do()
		}
		if len(b.waits) == 0 {
			break
		}
		ws := b.waits
		b.waits = nil
		for _, w := range ws {
			select {
			case <-w.ch:
				if w.round != nil && w.round.err != nil {
					out[w.i] = limit.Result{Err: w.round.err}
				} else if w.split {
					b.split(w.i)
				} else {
					b.lease(w.i, h.now().UnixNano(), w.gen)
				}
			case <-ctx.Done():
				what := "a lease claim"
				if w.split {
					what = "a split hand-over"
				}
				out[w.i] = limit.Result{Err: &waitError{what: what, err: ctx.Err()}}
			}
		}
	}
	if b.entered && h.inflight.Add(-1) == 0 && h.closed.Load() {
		h.idleOnce.Do(func() { close(h.idle) })
	}
}

// waitError is the error of a request whose context ended while it waited
// for another request's claim or hand-over: the store was sent the call and
// has not answered in time, an overload as the store's own queue reports it
// (limit.OverloadError, Left 0), so the limiter applies on_overload, not
// on_store_error. Were it only "unavailable", an `on_store_error: open`
// policy would admit every waiter of a hot key blindly during a surge
// (TestSurgeKeepsLimiting, once its key was leased by default: 22,022
// admitted against a budget of 922 plus the local share 922). A claim that
// itself fails reports the store's own error to its waiters.
type waitError struct {
	what string
	err  error
}

func (e *waitError) Error() string {
	return "store overloaded: waiting for " + e.what + ": " + e.err.Error()
}

func (e *waitError) Unwrap() error { return e.err }

// Is reports limit.ErrOverload and limit.ErrUnavailable as matches.
func (e *waitError) Is(target error) bool {
	return target == limit.ErrOverload || target == limit.ErrUnavailable
}

// noGen marks a request that has not waited for a claim.
const noGen = ^uint64(0)

// batch is the state of one Decide call. The lease-hit path touches none
// of its slices, so it allocates nothing.
type batch struct {
	h        *Layer
	ctx      context.Context
	reqs     []limit.Request
	out      []limit.Result
	call     call
	claims   []*claim
	handoffs []*handoff
	renews   []*entry
	waits    []waiter
	entered  bool // counted in Layer.inflight: Close waits for us
}

// call is one store call being built: reqs[j] is answered into pend[j].
type call struct {
	reqs []limit.Request
	pend []pending
}

// kinds of pending store requests.
const (
	kindPass    = iota // the caller's request, unchanged
	kindClaim          // a lease claim: claims[c]
	kindSplit          // a split sub-bucket take or peek
	kindTooBig         // a split peek for a cost above every sub-bucket's limit
	kindHandoff        // a split hand-over's claim or peek: handoffs[i], sub-bucket sub (-1: the main bucket)
	kindRenew          // a claim that renews a split key's hold on its main bucket: renews[i]
)

type pending struct {
	kind   uint8
	i      int // index in reqs/out; for kindClaim the index in batch.claims
	second bool
	sub, n int          // split: the sub-bucket asked, of n eligible
	first  limit.Result // split second try: the first answer
}

type waiter struct {
	i     int
	ch    chan struct{}
	gen   uint64
	split bool       // waits for a split hand-over, not a lease claim
	round *handRound // that hand-over's round
}

func (c *call) add(r limit.Request, p pending) {
	c.reqs = append(c.reqs, r)
	c.pend = append(c.pend, p)
}

func (b *batch) pass(i int) {
	b.call.add(b.reqs[i], pending{kind: kindPass, i: i})
}

// enter registers the batch with Close before it creates leases or starts
// claims; false means the Layer is closed.
func (b *batch) enter() bool {
	if b.entered {
		return true
	}
	b.h.inflight.Add(1)
	if b.h.closed.Load() {
		if b.h.inflight.Add(-1) == 0 {
			b.h.idleOnce.Do(func() { close(b.h.idle) })
		}
		return false
	}
	b.entered = true
	return true
}

// do makes the store call built so far and files its answers; answers may
// build the next call.
func (b *batch) do() {
	c := b.call
	b.call = call{}
	res := make([]limit.Result, len(c.reqs))
	b.h.store.Do(b.ctx, c.reqs, res)
	ns := b.h.now().UnixNano()
	for j, p := range c.pend {
		switch p.kind {
		case kindPass:
			b.out[p.i] = res[j]
		case kindClaim:
			b.claimed(b.claims[p.i], res[j], ns)
		case kindSplit:
			b.splitAnswer(p, res[j])
		case kindTooBig:
			r := b.splitReply(b.reqs[p.i].Policy, res[j], p.n)
			if r.Err == nil {
				r.Allowed, r.RetryAfterMs = false, -1
			}
			b.out[p.i] = r
		case kindHandoff:
			b.handoffAnswer(p, res[j])
		case kindRenew:
			e := b.renews[p.i]
			if res[j].Err == nil {
				e.hold.Store(-c.reqs[j].Hold)
				e.ready.Store(true)
			}
			e.renewing.Store(false)
		}
	}
	if len(b.handoffs) > 0 {
		b.handoffsNext()
	}
}

// split sends reqs[i] to one sub-bucket that can hold its cost, once the
// key's budget has been handed over to the sub-buckets.
func (b *batch) split(i int) {
	r := &b.reqs[i]
	subs := b.h.subPolicies(r.Policy)
	if subs == nil {
		b.pass(i)
		return
	}
	// A key not in the hot map (cooled, or reset, since Observe said it
	// was hot) has no spell of this instance's: it goes the main bucket's
	// way, which is held while another instance's spell lasts. Split as
	// it is, it would spend sub-buckets no hand-over had set.
	e := b.h.hotEntry(r.Key)
	if e == nil {
		b.pass(i)
		return
	}
	if hr := e.round.Load(); hr.state.Load() != handDone {
		b.handWait(i, e, hr, subs)
		return
	}
	if hold := e.hold.Load(); hold != 0 && b.h.now().UnixMicro() >= hold {
		// This instance's hold lapsed (no split decision here for
		// HoldFor): the main bucket may have refilled, and been spent,
		// while the sub-buckets refilled too. The spell is over: the key
		// leaves the hot map, so that its next request starts a new one,
		// and this request goes the main bucket's way.
		b.h.drop(r.Key)
		b.pass(i)
		return
	}
	b.renew(e, r.Policy)
	k := len(subs)
	b.h.st.split.Add(1)
	// Sub-buckets below r.Policy.Limit%k hold one token more than the
	// others; a cost that only they can hold goes to them.
	n := k
	switch {
	case r.Cost > subs[0].Limit:
		s := rand.IntN(k)
		b.call.add(limit.Request{Key: subKey(r.Key, s), Cost: r.Cost, Op: limit.OpPeek, Policy: subs[s]}, pending{kind: kindTooBig, i: i, n: k})
		return
	case r.Cost > subs[k-1].Limit:
		n = int(r.Policy.Limit % int64(k))
	}
	s := rand.IntN(n)
	b.call.add(limit.Request{Key: subKey(r.Key, s), Cost: r.Cost, Op: r.Op, Policy: subs[s]}, pending{kind: kindSplit, i: i, sub: s, n: n})
}

// handWait makes reqs[i] wait for the round of e's hand-over, hr or a
// later one: it starts hr when no request has, or a new round when hr
// failed, and adds the hand-over to the batch.
func (b *batch) handWait(i int, e *entry, hr *handRound, subs []*limit.Policy) {
	for {
		switch hr.state.Load() {
		case handNone:
			if hr.state.CompareAndSwap(handNone, handRunning) {
				b.startHandoff(e, b.reqs[i].Policy, subs, hr)
			}
		case handFailed:
			next := newRound(handRunning)
			if !e.round.CompareAndSwap(hr, next) {
				hr = e.round.Load()
				continue
			}
			hr = next
			b.startHandoff(e, b.reqs[i].Policy, subs, hr)
		}
		b.waits = append(b.waits, waiter{i: i, ch: hr.ch, split: true, round: hr})
		return
	}
}

// renew adds to the batch's next call a claim that extends the hold on
// e's main bucket to HoldFor from now, once RenewEvery has passed since
// this instance last set it, or when it has not renewed it yet in this
// spell (the first renewal marks the spell ready: see handoff), one at a
// time per key. Its hold is odd, a renewal's mark. Whatever the claim gets
// is discarded: tokens the main bucket got while no hold was in force (an
// RL.RESET on another instance deleted it, or the hold lapsed), which the
// sub-buckets hold already. So a reset's fresh main bucket is spent
// twice for RenewEvery at most; never more.
func (b *batch) renew(e *entry, p *limit.Policy) {
	now := b.h.now().UnixMicro()
	if e.ready.Load() && now < e.hold.Load()-holdUs+renewUs || !e.renewing.CompareAndSwap(false, true) {
		return
	}
	b.renews = append(b.renews, e)
	b.call.add(limit.Request{Key: e.key, Cost: p.Limit, Op: limit.OpClaim, Policy: p, Hold: -((now + holdUs) | 1)},
		pending{kind: kindRenew, i: len(b.renews) - 1})
}

// holdUs and renewUs are HoldFor and RenewEvery in µs.
const (
	holdUs  = int64(HoldFor / time.Microsecond)
	renewUs = int64(RenewEvery / time.Microsecond)
)

// splitAnswer files a sub-bucket's answer, or tries one other sub-bucket
// when the first rejected the request or could not be reached.
func (b *batch) splitAnswer(p pending, res limit.Result) {
	r := &b.reqs[p.i]
	k := len(b.h.subPolicies(r.Policy))
	if p.second {
		if res.Err != nil && p.first.Err == nil {
			res = p.first // a rejection beats no answer
		}
		b.out[p.i] = b.splitReply(r.Policy, res, k)
		return
	}
	if (res.Err == nil && res.Allowed) || p.n < 2 {
		b.out[p.i] = b.splitReply(r.Policy, res, k)
		return
	}
	b.h.st.splitRetries.Add(1)
	s := (p.sub + 1 + rand.IntN(p.n-1)) % p.n
	subs := b.h.subPolicies(r.Policy)
	b.call.add(limit.Request{Key: subKey(r.Key, s), Cost: r.Cost, Op: r.Op, Policy: subs[s]},
		pending{kind: kindSplit, i: p.i, second: true, sub: s, n: p.n, first: res})
}

// splitReply turns a sub-bucket's answer into the key's: the policy's limit,
// remaining scaled by k (an estimate: the other sub-buckets are not read),
// retry and reset as the sub-bucket said.
func (b *batch) splitReply(p *limit.Policy, res limit.Result, k int) limit.Result {
	if res.Err != nil {
		return limit.Result{Err: res.Err}
	}
	res.Limit = p.Limit
	res.Remaining = min(p.Limit, res.Remaining*int64(k))
	res.DecidedBy = limit.BySplit
	res.Granted = 0
	return res
}
