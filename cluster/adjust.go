package cluster

import (
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/lua"
)

// adjustArgs is how an OpAdjust of delta travels to the scripts, single
// and batch alike (lua.ScriptOp): a return of -delta to the current
// window (from 0), so that a positive delta spends without a check. A
// negative one never goes this way: it gives back only through its
// receipt (receiptItem).
func adjustArgs(delta int64) (cost int64, op limit.Op, from int64) {
	c, o := lua.ScriptOp(limit.OpAdjust, delta)
	return c, limit.Op(o), 0
}

// receiptItem makes it, the item of r, a call of its own receipt script:
// a take that records its receipt (lua.TakeReceipt), or a give-back that
// uses one (lua.GiveBack), on the key's state and the receipt's key, one
// slot. Neither goes in the batch script, so a take without a receipt
// pays nothing for them. A give-back without a receipt is refused here,
// and nothing is sent; so is one under a policy whose takes carry none
// (limit.Policy.Receipted). A take under such a policy is a plain take.
func receiptItem(it *item, r *limit.Request) error {
	give := r.Op == limit.OpAdjust && r.Cost < 0
	switch {
	case give && r.Receipt == "":
		return limit.ErrReceiptMissing
	case give && (!limit.ValidReceipt(r.Receipt) || !r.Policy.Receipted()):
		return limit.ErrReceiptInvalid
	case !give && (r.Op != limit.OpTake || !r.Policy.Receipted()):
		return nil
	}
	pa, rk := it.pa, ReceiptKey(r.Key, r.Receipt)
	if give {
		it.script = lua.GiveBack
		it.args = []any{"evalsha", lua.GiveBack.SHA, 2, it.key, rk, pa.id, pa.limit, pa.rate, pa.unit, -r.Cost, pa.owner}
	} else {
		it.script = lua.TakeReceipt
		it.args = []any{"evalsha", lua.TakeReceipt.SHA, 2, it.key, rk, pa.id, pa.limit, pa.rate, pa.unit, r.Cost, pa.owner, pa.life}
	}
	it.pa = nil // not batchable: the item is its args
	return nil
}

// fileReceipts finishes the results of a Do whose requests took with a
// receipt or gave back: an admitted take of a cost above 0 names its
// receipt, which the script recorded; a refused give-back is its error.
func fileReceipts(reqs []limit.Request, out []limit.Result) {
	for i := range reqs {
		r, res := &reqs[i], &out[i]
		if res.Err != nil || r.Receipt == "" || r.Policy == nil || !r.Policy.Receipted() {
			continue
		}
		switch {
		case r.Op == limit.OpTake && res.Allowed && r.Cost > 0:
			res.Receipt = r.Receipt
		case r.Op == limit.OpAdjust && r.Cost < 0:
			if err := lua.GiveBackErr(res); err != nil {
				*res = limit.Result{Err: err}
			}
		}
	}
}
