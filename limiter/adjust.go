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

// Receipts (docs/receipts.md). A take that asks for one (WantReceipt) gets
// a new id here, under a policy whose takes carry receipts
// (limit.Policy.Receipted); the store records it with the take, in one
// atomic step, and names it in Result.Receipt when it admits. Such a take
// skips the hot-key path (it is still counted as traffic there): a lease
// or a sub-bucket could not record it, and its give-back goes to the main
// bucket. A take answered without the store — a fallback, overload, the
// deny cache (a refusal) — carries no receipt: nothing to give back,
// which only under-admits.
//
// A give-back (delta < 0) names the receipt of a take on its key and
// gives back at most that take's cost, once, to the state it came from;
// without a receipt, or with one that is not well-formed, it is refused
// here and nothing is sent. When the store cannot answer, nothing is
// given back in any failure mode (the receipt is in the store): the reply
// says allowed 0, decided_by the mode.

// The store records and looks up a receipt bound to the request's user
// (limit.BindReceipt): the client is shown the receipt, the store keeps
// only the bound id, so another user's give-back of it is an unknown
// receipt.

// receiptOf checks the receipt of r, a take that asks for one or an
// adjust, and gives a take its id, bound to r.User for the store. It
// returns the receipt the client is shown for a take ("" for none).
func receiptOf(r *limit.Request) (string, error) {
	switch {
	case r.Op == limit.OpTake && r.WantReceipt:
		r.Receipt = ""
		if r.Policy.Receipted() && r.Cost > 0 {
			shown := limit.NewReceipt()
			r.Receipt = limit.BindReceipt(r.User, shown)
			return shown, nil
		}
	case r.Op == limit.OpAdjust && r.Cost < 0 && r.Receipt == "":
		return "", limit.ErrReceiptMissing
	case r.Op == limit.OpAdjust && r.Cost < 0 && !limit.ValidReceipt(r.Receipt):
		return "", limit.ErrReceiptInvalid
	case r.Op == limit.OpAdjust && r.Cost < 0:
		r.Receipt = limit.BindReceipt(r.User, r.Receipt)
	}
	return "", nil
}

// showReceipts puts back, in each admitted take's result, the receipt its
// client is shown in place of the bound id the store recorded.
func showReceipts(shown []string, out []limit.Result) {
	for i, r := range shown {
		if r != "" && out[i].Receipt != "" {
			out[i].Receipt = r
		}
	}
}

// givesBack reports whether r is a give-back.
func givesBack(r *limit.Request) bool { return r.Op == limit.OpAdjust && r.Cost < 0 }
