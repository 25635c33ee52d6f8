package cluster

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// Overload: a node that answers, but not as fast as requests arrive, is
// not down. Its queue grows, requests wait in it until their deadline, and
// pipelines go out carrying requests with little time left. Two things
// follow from that, and both are decided here:
//
//   - At the door (submit), a request whose expected wait in its node's
//     queue — by a model of the node's recent service times (service) —
//     is more than what is left of its
//     deadline is not queued: it is answered at once with a
//     limit.OverloadError, which the limiter decides by the policy's
//     on_overload. So the queue stays short enough that what is queued
//     still has its deadline when it goes out, and a surge is decided at
//     once instead of after a timeout.
//   - The breaker hears of a pipeline that got no reply only when nothing
//     else from the node arrived while it waited (send): a node whose
//     replies reach sluice, late, is alive. A request that ran out of time
//     waiting while the node kept answering is overloaded, not unavailable
//     (late).
//
// Only a node that answered within the breaker's cool-down is judged this
// way at the door: a node that stopped answering altogether (paused, cut)
// is left to the timeouts and the breaker, as before.

// service models the time a busy node takes to serve one pipeline of n
// decisions as a + b·n: a round trip and a script call whatever the
// pipeline carries, plus the work of each decision. It is fitted by least
// squares over exponentially weighted moments of recent pipelines, so it
// follows the node as load and batch sizes change; each sample is the
// time since the node last finished a pipeline (or since this one was
// sent, when later: the node was idle meanwhile), which is what a request
// queued behind others waits per pipeline — throughput, not latency.
//
// A model of latency per decision alone would say that small batches are
// slow, turn more away at the door, make batches smaller still: a spiral
// that sheds a node into idleness. With a + b·n a shallow queue costs one
// round trip and a deep one as many full pipelines as it fills.
type service struct {
	mu                 sync.Mutex
	last               int64   // unix ns of the last answer
	n, t, nn, nt       float64 // weighted means of n, t (ns), n², n·t
	samples            int
	fixed, perDecision atomic.Int64 // a and b, ns
}

// weight is the weight of a new sample in the moments.
const weight = 1.0 / 16

func (m *service) note(now, sent time.Time, n int) {
	if n <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := float64(max(0, now.UnixNano()-max(m.last, sent.UnixNano())))
	m.last = now.UnixNano()
	x := float64(n)
	if m.samples == 0 {
		m.n, m.t, m.nn, m.nt = x, t, x*x, x*t
	} else {
		m.n += (x - m.n) * weight
		m.t += (t - m.t) * weight
		m.nn += (x*x - m.nn) * weight
		m.nt += (x*t - m.nt) * weight
	}
	m.samples++
	a, b := m.t, 0.0 // all pipelines alike: their mean is the round
	if v := m.nn - m.n*m.n; v > 0.5 {
		b = max(0, (m.nt-m.n*m.t)/v)
		a = min(m.t, max(0, m.t-b*m.n))
	}
	m.fixed.Store(int64(a))
	m.perDecision.Store(int64(b))
}

// wait is the expected time to serve backlog decisions, in pipelines of at
// most maxBatch.
func (m *service) wait(backlog int64, maxBatch int) time.Duration {
	rounds := (backlog + int64(maxBatch) - 1) / int64(maxBatch)
	return time.Duration(rounds*m.fixed.Load() + backlog*m.perDecision.Load())
}

// noteAnswer records that the node answered a pipeline of n decisions
// sent at sent.
func (q *nodeQueue) noteAnswer(now, sent time.Time, n int) {
	q.noteAlive(now)
	q.service.note(now, sent, n)
	// The pipeline's size limit, in the spirit of TCP's congestion window:
	// it doubles while full pipelines come back within a quarter of the
	// timeout, and halves when one takes more than half of it. A node is
	// never sent a pipeline much larger than it was seen to serve in time,
	// so a pipeline's own size never makes it time out, and a burst after
	// an idle spell starts small.
	window, d := q.batchLimit.Load(), now.Sub(sent)
	switch {
	case d > q.s.cfg.Timeout/2:
		q.batchLimit.Store(max(minBatchLimit, window/2))
	case int64(n)*2 >= window && d <= q.s.cfg.Timeout/4:
		q.batchLimit.Store(min(int64(q.s.cfg.MaxBatch), window*2))
	}
}

// noteSilence records a pipeline that got no reply while nothing else from
// the node arrived: its size limit halves.
func (q *nodeQueue) noteSilence() {
	q.batchLimit.Store(max(minBatchLimit, q.batchLimit.Load()/2))
}

// minBatchLimit is the least a pipeline's size limit falls to.
const minBatchLimit = 8

// noteAlive records that the node answered at t. The time only moves
// forward: two workers that heard from the node may store theirs in
// either order.
func (q *nodeQueue) noteAlive(t time.Time) {
	for ns := t.UnixNano(); ; {
		old := q.answered.Load()
		if ns <= old || q.answered.CompareAndSwap(old, ns) {
			return
		}
	}
}

// answeredSince reports whether the node answered anything after t.
func (q *nodeQueue) answeredSince(t int64) bool { return q.answered.Load() > t }

// expectedWait is how long a request of n decisions queued now would wait
// for its reply.
func (q *nodeQueue) expectedWait(n int) time.Duration {
	return q.service.wait(q.backlog.Load()+int64(n), int(q.batchLimit.Load()))
}

// admit decides at the door whether u may join the queue: nil, or the
// overload error of its items. A unit without a deadline is always
// admitted, and so is one going round after MOVED or ASK: a redirection
// loop that runs out of time is unavailable, not overload.
func (q *nodeQueue) admit(u *unit, now time.Time) error {
	d, ok := u.ctx.Deadline()
	if !ok || u.redirected || !q.answeredSince(now.Add(-q.s.cfg.BreakerCooldown).UnixNano()) {
		return nil
	}
	wait, left := q.expectedWait(len(u.items)), d.Sub(now)
	if wait <= left {
		return nil
	}
	q.overloaded(len(u.items))
	return &limit.OverloadError{Node: q.addr, Wait: wait, Left: left}
}

// overloaded counts n decisions the node had no room for.
func (q *nodeQueue) overloaded(n int) {
	q.overloads.Add(int64(n))
	if o := q.s.cfg.Observer; o != nil {
		for range n {
			o.Error(q.addr, KindOverload)
		}
	}
}

// late is the error of a unit whose deadline passed before its node's
// reply: overloaded while the node is alive — it answered something since
// the unit was queued, or within the cool-down and its breaker is closed
// — and unavailable once the node is known to be down (its breaker open:
// threshold pipelines unanswered, and the PING after them too) or has
// answered nothing for a cool-down. Under a surge sluice itself may read
// replies late (its goroutines wait for a CPU); that is overload too. A
// unit sent round again after MOVED or ASK that runs out of time is in a
// redirection loop: unavailable, as rounds says. The waiter of u and its
// worker (expired) may both judge it; only the first counts it.
func (s *Store) late(u *unit, err error) error {
	first := u.judged.CompareAndSwap(false, true)
	if q := u.q; q != nil && !u.redirected && q.alive(u.queued) {
		if first {
			q.overloaded(len(u.items))
		}
		return &limit.OverloadError{Node: u.addr, Wait: time.Duration(time.Now().UnixNano() - u.queued)}
	}
	return s.unavailable(u.addr, err)
}

// expired files the answer of a unit whose deadline passed while it was
// queued, before any of it was sent: by late's rule, overloaded while the
// node is alive. Under a surge, or on a machine whose CPUs are busy, the
// worker often reaches such a unit before its waiter wakes, and the
// waiter then takes the worker's answer: it must be the same one, not a
// fault of a node that kept answering.
func (q *nodeQueue) expired(u *unit, err error) {
	e := q.s.late(u, err)
	var ue *limit.UnavailableError
	unavailable := errors.As(e, &ue)
	for _, it := range u.items {
		it.res = limit.Result{Err: e}
		if unavailable {
			q.s.observeErr(q.addr, err)
		}
	}
}

// alive reports whether the node counts as alive for a request queued at
// queued (unix ns).
func (q *nodeQueue) alive(queued int64) bool {
	if q.answeredSince(queued) {
		return true
	}
	return q.br.state.Load() == closed && q.answeredSince(time.Now().Add(-q.s.cfg.BreakerCooldown).UnixNano())
}

// confirmAlive is the breaker's question to the node before it opens: a
// PING, waiting up to the cool-down (MaxTimeout at most, the longest a
// connection may wait). The node is alive when it answers, or when it
// answered anything else since the PING went: a PING that timed out
// while its reply waited unread (overload_read.go) counts as answered.
func (q *nodeQueue) confirmAlive() bool {
	ctx, cancel := context.WithTimeout(context.Background(), min(q.s.cfg.BreakerCooldown, q.s.cfg.MaxTimeout))
	defer cancel()
	asked := time.Now().UnixNano()
	if err := q.client.Ping(ctx).Err(); err != nil {
		return q.answeredSince(asked)
	}
	q.noteAlive(time.Now())
	return true
}

// lateReplies turns the timeouts of a pipeline that got no reply while
// the node answered others into overload: the node is alive, and its
// reply to this one came too late for the requests in it.
func (q *nodeQueue) lateReplies(batch []*unit, sent time.Time) {
	for _, u := range batch {
		if !u.redirected {
			q.lateUnit(u, sent)
		}
	}
}

// lateUnit turns u's timeouts into overload; it counts them unless u's
// waiter has judged u already (late).
func (q *nodeQueue) lateUnit(u *unit, sent time.Time) {
	first := u.judged.CompareAndSwap(false, true)
	for _, it := range u.items {
		var ue *limit.UnavailableError
		if errors.As(it.res.Err, &ue) && errKind(ue.Err) == KindTimeout {
			if first {
				q.overloaded(1)
			}
			it.res = limit.Result{Err: &limit.OverloadError{Node: q.addr, Wait: time.Since(sent)}}
		}
	}
}
