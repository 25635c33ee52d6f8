package limiter

import (
	"sync/atomic"

	"github.com/sluice-rl/sluice/limit"
)

// The adjust path: RL.ADJUST (limit.OpAdjust, Cost the signed delta). It
// comes in through Decide (take.go) with the takes of its batch, is
// checked here (checkAdjust), goes to the store in the same call as they
// do (decide.go), and is counted here (adjusted). It differs from a take
// in four ways:
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
//
// A give-back names the receipt of a take on its key (take.go, checkTake;
// docs/receipts.md) and gives back at most that take's cost, once, to the
// state it came from; without a receipt, or with one that is not
// well-formed, it is refused here and nothing is sent. When the store
// cannot answer, nothing is given back in any failure mode (the receipt
// is in the store): the reply says allowed 0, decided_by the mode.

// AdjustStats count the RL.ADJUST calls that were applied, and their
// tokens (by the store, the fallback or in shadow mode, not the errors).
type AdjustStats struct {
	Calls    atomic.Int64 // adjusts answered without an error
	Spent    atomic.Int64 // tokens of positive deltas
	Returned atomic.Int64 // tokens of negative deltas
}

// checkAdjust checks an adjust under its policy p: a rate policy that is
// adjustable, and a give-back names a well-formed receipt, which it binds
// to r.User for the store (limit.BindReceipt): another user's receipt is
// then unknown there.
func checkAdjust(r *limit.Request, p *limit.Policy) error {
	if p.Algorithm.IsConcurrency() {
		return wrongAlgorithm("rl.adjust", p)
	}
	if err := p.Adjustable(); err != nil {
		return err
	}
	switch {
	case r.Cost >= 0:
		return nil
	case r.Receipt == "":
		return limit.ErrReceiptMissing
	case !limit.ValidReceipt(r.Receipt):
		return limit.ErrReceiptInvalid
	}
	r.Receipt = limit.BindReceipt(r.User, r.Receipt)
	return nil
}

// givesBack reports whether r is a give-back.
func givesBack(r *limit.Request) bool { return r.Op == limit.OpAdjust && r.Cost < 0 }

// adjusted counts one adjust answered without an error, res: a give-back
// that recorded nothing (the store could not answer: allowed 0) returned
// no token.
func (l *Limiter) adjusted(front string, r *limit.Request, res *limit.Result) {
	l.stats.Adjust.Calls.Add(1)
	kind, tokens := CorrectionGiveBackFailed, int64(0)
	switch {
	case r.Cost >= 0: // RL.ADJUST 0 reads the state and spends nothing
		l.stats.Adjust.Spent.Add(r.Cost)
		kind, tokens = CorrectionSpend, r.Cost
	case res.Allowed:
		l.stats.Adjust.Returned.Add(-r.Cost)
		kind, tokens = CorrectionGiveBack, -r.Cost
	}
	if l.onCorrection != nil {
		l.onCorrection(front, r.Policy, kind, res.DecidedBy, tokens)
	}
}
