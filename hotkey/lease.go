package hotkey

import (
	"hash/maphash"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// lease is the tokens this instance holds for one key: taken from the
// shared bucket by OpClaim, spent here without a round trip, and given back
// by OpReturn when unused for the lease TTL, when evicted, and on Close.
type lease struct {
	mu  sync.Mutex
	key string
	p   *limit.Policy
	b   limit.Bucket

	held        int64         // tokens claimed and not yet spent, under p in epoch
	epoch       uint64        // Layer.epoch when held was claimed (see relabel)
	expires     int64         // ns: held tokens go back after this unless a claim renews it
	remaining   int64         // the shared bucket's remaining after the last claim
	rejectUntil int64         // ns: the last claim found no whole token; none exists before this
	claiming    chan struct{} // open while a claim is in flight
	gen         uint64        // claims completed
	err         error         // of the last claim, nil when it answered
	dead        bool          // evicted or expired: find or make another
	dropped     bool          // by RL.RESET: held tokens are dropped, not given back
}

// claim is a claim of this batch: the lease, tokens asked, and the requests
// (indices) waiting on it in order.
type claim struct {
	l     *lease
	p     *limit.Policy // the policy, and the Layer's epoch, it was sent under
	epoch uint64
	asked int64
	idx   []int
	done  bool
}

// MaxBlockDivisor bounds a claim: an instance claims at most
// max(cost, Limit/MaxBlockDivisor, 1) tokens at once and never holds more.
// With 1/16 of the burst, up to 16 instances can hold full leases before
// the bucket is drained by leases alone, a partial grant shares out the
// last tokens, and what one instance holds idle goes back within 1.5 lease
// TTLs, so no instance starves for longer than that while another hoards.
const MaxBlockDivisor = 16

// lease answers reqs[i] from its key's lease, or attaches it to a claim, or
// makes it wait for another goroutine's claim. gen is the lease's claim
// count when the request started waiting, noGen if it did not.
func (b *batch) lease(i int, ns int64, gen uint64) {
	h, r := b.h, &b.reqs[i]
	hash := maphash.String(h.seed, r.Key)
	cache := h.leases[hash%leaseShards]
	for {
		l, ok := cache.Peek(r.Key)
		if !ok {
			if !b.enter() {
				b.pass(i)
				return
			}
			bk, err := r.Policy.Bucket()
			if err != nil {
				b.pass(i)
				return
			}
			l = &lease{key: r.Key, p: r.Policy, b: bk, epoch: h.epoch.Load()}
			if prev, found, _ := cache.PeekOrAdd(l.key, l); found {
				l = prev
			}
		}
		l.mu.Lock()
		if l.dead {
			l.mu.Unlock()
			gen = noGen
			continue
		}
		if l.gen > 0 && l.claiming == nil && ns >= l.expires {
			// Expired, and the sweep has not come yet: expire it now, so a
			// lease answers for one TTL after its last claim, no longer
			// (a reset elsewhere is then seen within one TTL).
			l.mu.Unlock()
			if cur, ok := cache.Peek(r.Key); ok && cur == l {
				cache.Remove(r.Key) // calls evicted: dead, its tokens go back
			}
			gen = noGen
			continue
		}
		if l.p != r.Policy || l.epoch != h.epoch.Load() {
			if bk, err := r.Policy.Bucket(); err == nil {
				l.relabel(r.Policy, bk, h.epoch.Load())
			}
		}
		switch {
		case l.held >= r.Cost:
			l.held -= r.Cost
			b.out[i] = l.reply(true, r.Cost, ns)
			h.st.leaseHits.Add(1)
		case gen != noGen && l.gen > gen && l.err != nil:
			b.out[i] = limit.Result{Err: l.err} // the claim we waited for failed
		case l.claiming != nil:
			if c := b.own(l); c != nil {
				c.idx = append(c.idx, i)
			} else {
				b.waits = append(b.waits, waiter{i: i, ch: l.claiming, gen: l.gen})
			}
		case ns < l.rejectUntil:
			b.out[i] = l.reply(false, r.Cost, ns)
			h.st.leaseRejects.Add(1)
		default:
			if !b.enter() {
				l.mu.Unlock()
				b.pass(i)
				return
			}
			c := &claim{l: l, p: l.p, epoch: l.epoch, asked: h.block(l, hash, r.Cost, ns), idx: []int{i}}
			l.claiming = make(chan struct{})
			b.claims = append(b.claims, c)
			b.call.add(limit.Request{Key: l.key, Cost: c.asked, Op: limit.OpClaim, Policy: l.p},
				pending{kind: kindClaim, i: len(b.claims) - 1})
		}
		l.mu.Unlock()
		return
	}
}

// relabel puts l under policy p (bucket b) in epoch, dropping the tokens
// it holds under another policy or in an earlier epoch (the policies in
// force changed since they were claimed: see Layer.PoliciesChanged), and
// the wait of an empty claim. The tokens are dropped, not given back:
// once a new policy is in force for the key, no token claimed under the
// old one may admit, here or anywhere (a return under the old policy would
// credit the state the new one now owns). l.mu is held.
func (l *lease) relabel(p *limit.Policy, b limit.Bucket, epoch uint64) {
	l.p, l.b, l.epoch = p, b, epoch
	l.held, l.remaining, l.rejectUntil = 0, 0, 0
}

// own returns this batch's claim on l, if any.
func (b *batch) own(l *lease) *claim {
	for _, c := range b.claims {
		if c.l == l && !c.done {
			return c
		}
	}
	return nil
}

// block returns the tokens to claim so that l holds one block: this
// instance's arrival rate for the key times the lease TTL, at least cost,
// at most the bound of MaxBlockDivisor.
func (h *Layer) block(l *lease, hash uint64, cost, ns int64) int64 {
	want := math.Ceil(h.sk.add(hash, ns, 0) * float64(cost) * h.ttl.Seconds())
	bound := max(1, l.p.Limit/MaxBlockDivisor)
	blk := cost
	if want > float64(cost) {
		blk = int64(min(want, float64(bound)))
	}
	return max(cost, blk) - l.held
}

// claimed files the answer to claim c and answers the requests attached to
// it, in order; those it cannot serve although the claim was granted in
// full (others spent the tokens first) try again in the next round.
func (b *batch) claimed(c *claim, res limit.Result, ns int64) {
	h, l := b.h, c.l
	h.st.claims.Add(1)
	c.done = true
	l.mu.Lock()
	l.gen++
	l.err = res.Err
	close(l.claiming)
	l.claiming = nil
	if cur := h.epoch.Load(); l.epoch != cur {
		l.relabel(l.p, l.b, cur)
	}
	// A claim sent under another policy or epoch than the lease's now
	// (the policies changed while it was in flight) is dropped: its
	// requests claim again under the policy in force.
	stale := res.Err == nil && (c.p != l.p || c.epoch != l.epoch)
	if res.Err == nil {
		h.st.claimed.Add(res.Granted)
	}
	if res.Err == nil && !stale {
		l.held += res.Granted
		l.remaining = res.Remaining
		l.expires = ns + int64(h.ttl)
		switch {
		case res.Granted == 0:
			l.rejectUntil = ns + max(1, res.RetryAfterMs)*int64(time.Millisecond)
		case res.Granted < c.asked:
			// The bucket is below one token. Wait for one, plus up to as
			// long again at random: the instance that just won would
			// otherwise claim first at every refill, its rivals' waits
			// being rounded up to whole milliseconds, and starve them.
			one := max(1, l.tokensMs(1)) * int64(time.Millisecond)
			l.rejectUntil = ns + one + rand.Int64N(one)
		}
	}
	for _, i := range c.idx {
		r := &b.reqs[i]
		switch {
		case stale:
			b.waits = append(b.waits, waiter{i: i, ch: retryNow, gen: noGen})
		case l.held >= r.Cost:
			l.held -= r.Cost
			b.out[i] = l.reply(true, r.Cost, ns)
			h.st.leaseHits.Add(1)
		case res.Err != nil:
			b.out[i] = limit.Result{Err: res.Err}
		case res.Granted < c.asked:
			b.out[i] = l.reply(false, r.Cost, ns)
		default:
			b.waits = append(b.waits, waiter{i: i, ch: retryNow, gen: noGen})
		}
	}
	dead := l.dead
	var back int64
	if dead {
		back, l.held = l.held, 0
		if l.dropped {
			back = 0
		}
	}
	epoch := l.epoch
	l.mu.Unlock()
	if dead {
		h.giveBack(l, back, epoch)
		return
	}
	// A claim makes the lease the most recently used one. Get, not Add:
	// a lease removed meanwhile is dead and must not come back.
	h.leases[maphash.String(h.seed, l.key)%leaseShards].Get(l.key)
}

// retryNow is a closed channel: a waiter on it retries at once.
var retryNow = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// reply answers a request of cost from l; l.mu is held and l.held already
// reduced when allowed. remaining is an estimate: the shared bucket's
// remaining at the last claim plus the tokens still held here (other
// instances' takes since, and refill since, are not known). reset_after is
// the time to refill that estimate; a rejection's retry_after is the time
// until the last claim said a token exists, plus the time for the rest of
// cost, never 0.
func (l *lease) reply(allowed bool, cost, ns int64) limit.Result {
	rem := min(l.b.Limit, l.remaining+l.held)
	res := limit.Result{
		Allowed: allowed, Limit: l.b.Limit, Remaining: rem, RetryAfterMs: -1,
		ResetAfterMs: l.tokensMs(l.b.Limit - rem), DecidedBy: limit.ByLease,
	}
	if !allowed {
		need := cost - l.held
		wait := int64(0)
		if ns < l.rejectUntil {
			wait = ceilDiv(l.rejectUntil-ns, int64(time.Millisecond))
			need--
		}
		res.RetryAfterMs = max(1, wait+l.tokensMs(need))
	}
	return res
}

// tokensMs returns the ms the bucket takes to refill n tokens, rounded up.
func (l *lease) tokensMs(n int64) int64 {
	return ceilDiv(n*l.b.Scale, l.b.Refill*1000)
}
