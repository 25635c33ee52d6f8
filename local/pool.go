package local

import "github.com/sluice-rl/sluice/limit"

// PoolState is one region's pool, as pool.lua keeps it: Tokens whole
// tokens, written at At (µs since the epoch). The zero value is an absent
// key, which is an EMPTY pool (a pool never refills by itself); a pool
// that ends at 0 tokens is never kept, as the script deletes it.
type PoolState struct {
	Tokens int64 // field v
	At     int64 // field t
}

// TakePool decides op for cost tokens on st at now (µs since the epoch),
// as pool.lua does, and reports whether st changed (written or deleted).
// OpTake spends cost tokens if the pool holds them; OpPeek reports the
// same, spending nothing; OpClaim drains up to cost (Result.Granted);
// OpReturn fills cost, never above the limit (and renews the TTL even on
// a full pool). A cost of 0 or less is allowed and changes nothing. A
// stored count above the limit (a lowered limit) reads as the limit.
func TakePool(st *PoolState, pp limit.PoolParams, cost, now int64, op limit.Op) (limit.Result, bool) {
	v := min(st.Tokens, pp.Limit)
	res := limit.Result{Limit: pp.Limit, RetryAfterMs: -1}
	wait := func(n int64) int64 {
		if n > pp.Limit {
			return -1
		}
		return max(1, ceilDiv((n-v)*pp.TokenUs, 1000))
	}
	write := false
	switch {
	case cost <= 0:
		res.Allowed = true
	case op == limit.OpReturn:
		res.Allowed = true
		if cost >= pp.Limit-v { // not v + cost: cost may be near MaxInt64
			v = pp.Limit
		} else {
			v += cost
		}
		write = true
	case op == limit.OpClaim:
		res.Granted = min(cost, v)
		if res.Granted > 0 {
			res.Allowed = true
			v -= res.Granted
			write = true
		} else {
			res.RetryAfterMs = wait(1)
		}
	case cost <= v:
		res.Allowed = true
		if op == limit.OpTake {
			v -= cost
			write = true
		}
	default:
		res.RetryAfterMs = wait(cost)
	}
	if write {
		if v <= 0 {
			*st = PoolState{}
		} else {
			*st = PoolState{Tokens: v, At: now}
		}
	}
	res.Remaining = v
	res.ResetAfterMs = ceilDiv((pp.Limit-v)*pp.TokenUs, 1000)
	return res, write
}

// takePool is TakePool in the shape of the other algorithms' take: a pool
// has no window to name and no hold, so from is not read.
func takePool(st *PoolState, pp limit.PoolParams, cost, now int64, op limit.Op, _ int64) (limit.Result, bool) {
	return TakePool(st, pp, cost, now, op)
}
