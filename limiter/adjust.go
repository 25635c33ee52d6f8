package limiter

import (
	"sync/atomic"

	"github.com/sluice-rl/sluice/limit"
)

// RL.ADJUST (limit.OpAdjust, Cost the signed delta) goes the way of a
// take through Decide, with four differences:
//
//   - a policy that is not adjustable (limit.Policy.Adjustable: scope
//     global) answers an error, and nothing is sent;
//   - it never takes the hot-key path, and is not counted as traffic
//     there: a leased or split key is adjusted on its main bucket, whose
//     budget a lease or the sub-buckets borrow from;
//   - a give-back (delta < 0) the store made drops the key's refusal from
//     the deny cache, as an RL.MTAKE refund does: the tokens it gave back
//     may admit what was refused;
//   - it is counted in AdjustStats, not as a decision: an adjust admits
//     nothing, so it would only blur allowed and rejected.
//
// When the store cannot answer, on_store_error applies as to a take:
// local adjusts this instance's fallback bucket, open and closed answer
// from nothing and record nothing (decided_by says which).

// AdjustStats count the RL.ADJUST calls that were applied, and their
// tokens (by the store, the fallback or in shadow mode, not the errors).
type AdjustStats struct {
	Calls    atomic.Int64 // adjusts answered without an error
	Spent    atomic.Int64 // tokens of positive deltas
	Returned atomic.Int64 // tokens of negative deltas
}

// notAdjustable is the error of an adjust whose policy refuses it; nil
// for any other request.
func notAdjustable(r *limit.Request) error {
	if r.Op != limit.OpAdjust {
		return nil
	}
	return r.Policy.Adjustable()
}

// forgetGivenBack drops from the deny cache the keys a give-back of reqs
// credited in the store.
func (l *Limiter) forgetGivenBack(reqs []limit.Request, out []limit.Result) {
	for i := range reqs {
		if reqs[i].Op == limit.OpAdjust && reqs[i].Cost < 0 && out[i].Err == nil && reqs[i].Policy != nil {
			l.deny.Forget(reqs[i].Key, reqs[i].Policy)
		}
	}
}

// adjusted counts one applied adjust.
func (l *Limiter) adjusted(r *limit.Request) {
	l.stats.Adjust.Calls.Add(1)
	if r.Cost > 0 {
		l.stats.Adjust.Spent.Add(r.Cost)
	} else {
		l.stats.Adjust.Returned.Add(-r.Cost)
	}
}
