package region

import (
	"math"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// A pool's tokens left home's bucket when they were claimed, and home's
// bucket refills beside them: tokens a pool keeps for long, unspent,
// count twice against the budget, once there and once in the refill.
// The bound (docs/regions.md) allows a pooled token to have left home up
// to one allocator horizon before it is admitted, rate × horizon. So
// every round, for each key whose pool holds tokens, the allocator reads
// home's bucket (the claim's answer, or a peek that travels with the
// claims), and gives back to home what of the pool is both
//
//   - stale: not put there by this instance within the last horizon, and
//   - beyond the bound: the pool, home's bucket as it may refill until
//     the next round, and the other regions' pools (by their boards)
//     together above limit + rate × horizon.
//
// Before (issue 28 §3k), a pool kept a demand's tokens until the key had
// been quiet for 3 s: 3 tokens claimed for one refused take of a 10 + 5/s
// key sat in the pool while home's bucket refilled to full, and a burst a
// second later got 15 in 4 ms against a bound of 13.83 (floor included).
// What comes back to a full home's bucket is gone: an under-admission of
// at most what the rule gives back, only when the pool would exceed the
// bound.

// fillsKept is how many of its last fills an entry remembers: at least a
// horizon's worth at one fill per round.
const fillsKept = 16

// fill is tokens this instance put in a pool, and when (ns).
type fill struct{ at, n int64 }

// noteFill records that n tokens were put in e's pool at ns (the
// allocator's own).
func (e *entry) noteFill(ns, n int64) {
	e.fills[e.nfill%fillsKept] = fill{ns, n}
	e.nfill++
}

// fresh is what this instance put in e's pool within d before ns.
func (e *entry) fresh(ns int64, d time.Duration) int64 {
	var n int64
	for _, f := range e.fills {
		if f.n > 0 && ns-f.at < int64(d) {
			n += f.n
		}
	}
	return n
}

// trim gives back home the stale part of the pools beyond the bound (see
// above), for the keys of w: granted and peeked are home's answers to w's
// claims and peeks (Remaining: its bucket after them).
func (l *Layer) trim(ns int64, w *roundWork, granted, peeked []limit.Result) {
	check := func(e *entry, p *limit.Policy, home limit.Result) {
		pool := e.pool.Load()
		if home.Err != nil || pool <= 0 || p == nil || p.Period <= 0 {
			return
		}
		stale := pool - e.fresh(ns, w.horizon)
		if stale <= 0 {
			return
		}
		rate := float64(p.Rate) / p.Period.Seconds()
		L := float64(p.Limit)
		next := l.tick + time.Duration(l.rtt.Load()) // until the next round's look
		h := math.Min(L, float64(home.Remaining)+rate*next.Seconds())
		over := math.Ceil(float64(pool) + h + float64(e.board.pools) - L - rate*w.horizon.Seconds())
		if over < 1 {
			return
		}
		l.st.trimmed.Add(l.giveBack(e, min(stale, int64(over))))
	}
	for i, e := range w.claimOf {
		check(e, w.claims[i].Policy, granted[i])
	}
	for i, e := range w.peekOf {
		check(e, w.peeks[i].Policy, peeked[i])
	}
}
