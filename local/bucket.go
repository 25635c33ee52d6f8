package local

import (
	"math"

	"github.com/sluice-rl/sluice/limit"
)

// BucketState is one token bucket in the exact units of limit.Bucket: Units
// scaled tokens, true at At (µs since the Unix epoch), measured with Scale
// units per token. The zero value is an absent bucket, which is full.
type BucketState struct {
	Units int64
	At    int64
	Scale int64
}

// TakeBucket decides op for cost tokens on st at now (µs since the epoch),
// as token_bucket.lua does, and reports whether st changed. OpTake spends
// cost tokens if they exist; OpPeek reports the same, spending nothing;
// OpClaim takes up to cost whole tokens (Result.Granted); OpReturn gives
// cost tokens back, never above the limit. A rejected request spends
// nothing. A bucket that ends full is reported as changed with Scale 0
// (absent), as the script deletes it.
func TakeBucket(st *BucketState, b limit.Bucket, cost int64, now int64, op limit.Op) (limit.Result, bool) {
	return takeBucket(st, b, cost, now, op, 0)
}

// takeBucket is TakeBucket with a hold for OpClaim (hold, µs; 0: none): a
// claim that holds the bucket until |hold|, so that nothing refills before
// it (the main bucket of a split hot key); a positive hold starts one only
// when none is in force, a negative one extends it. Result.Window is then
// the hold in force before (0: none), as token_bucket.lua's.
func takeBucket(st *BucketState, b limit.Bucket, cost int64, now int64, op limit.Op, hold int64) (limit.Result, bool) {
	v, at := b.Capacity, now
	if st.Scale != 0 {
		v, at = st.Units, st.At
		if st.Scale != b.Scale {
			v = convert(v, st.Scale, b.Scale)
		}
		if now > at {
			v = refill(v, now-at, b)
			at = now
		}
		v = min(max(v, debtFloor(b)), b.Capacity)
	}
	held := int64(0) // a hold in force: nothing refills before at
	if at > now {
		held = at
	}
	perMs := b.Refill * 1000
	res := limit.Result{Limit: b.Limit, RetryAfterMs: -1}
	var write bool
	if op == limit.OpClaim {
		res.Granted = max(0, min(cost, v/b.Scale)) // v < 0 in debt
		if res.Granted > 0 {
			res.Allowed = true
			v -= res.Granted * b.Scale
			write = true
		} else if cost <= 0 {
			res.Allowed = true // a claim of nothing gets nothing, at once
		} else {
			res.RetryAfterMs = ceilDiv(b.Scale-v, perMs)
		}
		if h, ok := holdUntil(&res, at, held, now, hold); ok {
			at, v, write = h, min(v, 0), true // what a claim of whole tokens left (a fraction) goes too; a debt stays
		}
	} else {
		v, write = spendUnits(&res, v, b, cost, op)
	}
	if write {
		if v >= b.Capacity {
			*st = BucketState{}
		} else {
			*st = BucketState{Units: v, At: at, Scale: b.Scale}
		}
	}
	res.Remaining = max(0, v/b.Scale)
	res.ResetAfterMs = ceilDiv(b.Capacity-v, perMs)
	return res, write
}

// spendUnits decides an OpReturn, OpTake or OpPeek for cost on v units,
// the same for both bucket algorithms (v is what the token bucket holds;
// under GCRA, the capacity minus the debt, which may be negative):
// OpReturn gives cost tokens back, never above the capacity, and an
// OpReturn of a negative cost (OpAdjust's spend, see State) spends -cost
// without a check, down to debtFloor; OpTake and OpPeek admit cost when v
// holds it (OpTake spending it), else set the retry, unless cost > Limit,
// which never fits. It returns v after the decision and whether it must
// be written.
func spendUnits(res *limit.Result, v int64, b limit.Bucket, cost int64, op limit.Op) (int64, bool) {
	if op == limit.OpReturn {
		res.Allowed = true
		switch lo := debtFloor(b); {
		case cost < 0 && -cost > (v-lo)/b.Scale: // not v + cost×Scale: it may overflow
			return lo, true
		case cost < 0:
			return max(lo, v+cost*b.Scale), true
		case cost >= b.Limit && v < 0: // in debt: Limit of the tokens pay Capacity first, as bucket.lua's
			v, cost = v+b.Capacity, cost-b.Limit
		}
		if cost >= b.Limit {
			return b.Capacity, true
		}
		return min(b.Capacity, v+cost*b.Scale), true
	}
	if cost > b.Limit {
		return v, false
	}
	need := cost * b.Scale
	if v < need {
		res.RetryAfterMs = ceilDiv(need-v, b.Refill*1000)
		return v, false
	}
	res.Allowed = true
	if op == limit.OpTake {
		return v - need, true
	}
	return v, false
}

// holdUntil is the hold of an OpClaim of both bucket algorithms: with a
// hold asked (hold != 0) Result.Window is the hold in force before (held;
// 0: none), and the claim holds the bucket until |hold| when that is ahead
// of now and either no hold is in force or hold < 0 (extend it). It
// returns the bucket's new time (nothing refills before it) and true when
// the claim holds.
func holdUntil(res *limit.Result, at, held, now, hold int64) (int64, bool) {
	if hold != 0 {
		res.Window = held
	}
	if until := abs(hold); until > now && (held == 0 || hold < 0) {
		return max(at, until), true
	}
	return at, false
}

// refill adds elapsed µs of refill to v, saturating at the capacity: the
// product is only formed when it cannot overflow.
func refill(v, elapsed int64, b limit.Bucket) int64 {
	if v >= b.Capacity || elapsed >= (b.Capacity-v+b.Refill-1)/b.Refill {
		return b.Capacity
	}
	return v + elapsed*b.Refill
}

// convert rescales units from one scale to another, rounding down (a
// debt, v < 0, grows), as the script does with doubles (exact for the
// magnitudes Bucket allows).
func convert(v, from, to int64) int64 {
	return int64(math.Floor(float64(v) / float64(from) * float64(to)))
}

// debtFloor is the fewest units a bucket may hold (bucket.lua's
// debt_floor): a debt of at most one capacity, and never so deep that
// Capacity − v leaves MaxScaled (GCRA's largest debt is the same bound).
func debtFloor(b limit.Bucket) int64 {
	return b.Capacity - min(2*b.Capacity, limit.MaxScaled-1)
}

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
