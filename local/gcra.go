package local

import (
	"math"

	"github.com/sluice-rl/sluice/limit"
)

// GCRAState is one GCRA key in the exact units of limit.Bucket, as gcra.lua
// keeps it: the theoretical arrival time is At + Debt/Refill µs, Debt units
// measured with Scale units per token, written at At (µs since the epoch).
// The zero value is an absent key, whose TAT is not ahead of now: owed
// nothing, full.
type GCRAState struct {
	At    int64 // hash field a
	Debt  int64 // hash field d: TAT - At, in units
	Scale int64 // hash field u
}

// TakeGCRA decides op for cost tokens on st at now (µs since the epoch), as
// gcra.lua does, and reports whether st changed (written or deleted). The
// replies are those of TakeBucket for the same policy: the debt is the
// capacity minus the bucket's units. A cost of 0 is admitted and spends
// nothing; a take or a return of 0 writes the same TAT at now, as the bucket
// writes the same units (the bucket rejects a claim of 0, with a retry of 0
// in Go and of 0 or less in Lua; here it is admitted, granted 0). A key whose TAT ends not ahead of now is reported as changed
// with the zero value, as the script deletes it.
func TakeGCRA(st *GCRAState, b limit.Bucket, cost, now int64, op limit.Op) (limit.Result, bool) {
	return takeGCRA(st, b, cost, now, op, 0)
}

// takeGCRA is TakeGCRA with a hold for OpClaim, as takeBucket's.
func takeGCRA(st *GCRAState, b limit.Bucket, cost, now int64, op limit.Op, hold int64) (limit.Result, bool) {
	d, at := int64(0), now
	if st.Scale != 0 {
		d, at = st.Debt, st.At
		maxd := min(2*b.Capacity, limit.MaxScaled-1) // a debt above the burst is kept, as gcra.lua's
		if st.Scale != b.Scale {
			d = convertUp(d, st.Scale, b.Scale, maxd)
		}
		if now > at {
			d = pay(d, now-at, b.Refill)
			at = now
		}
		d = min(max(d, 0), maxd)
	}
	held := int64(0) // a hold in force: nothing is paid before at
	if at > now {
		held = at
	}
	v := b.Capacity - d // what the token bucket holds
	perMs := b.Refill * 1000
	res := limit.Result{Limit: b.Limit, RetryAfterMs: -1}
	var write bool
	switch {
	case op == limit.OpClaim && cost == 0:
		res.Allowed = true // granted nothing, writes nothing
		if hold != 0 {
			res.Window = held
		}
	case op == limit.OpClaim:
		res.Granted = max(0, min(cost, v/b.Scale))
		if res.Granted > 0 {
			res.Allowed = true
			v -= res.Granted * b.Scale
			write = true
		} else {
			res.RetryAfterMs = ceilDiv(b.Scale-v, perMs)
		}
		if h, ok := holdUntil(&res, at, held, now, hold); ok {
			at, v, write = h, min(v, 0), true // what a claim of whole tokens left (a fraction) goes too
		}
	default:
		v, write = spendUnits(&res, v, b, cost, op)
	}
	d = b.Capacity - v
	if write {
		if d <= 0 {
			*st = GCRAState{}
		} else {
			*st = GCRAState{At: at, Debt: d, Scale: b.Scale}
		}
	}
	res.Remaining = max(0, v/b.Scale)
	res.ResetAfterMs = ceilDiv(d, perMs)
	return res, write
}

// pay takes elapsed µs of refill off the debt d, down to 0: the product is
// only formed when it cannot overflow.
func pay(d, elapsed, refill int64) int64 {
	if d <= 0 || elapsed >= (d+refill-1)/refill {
		return 0
	}
	return d - elapsed*refill
}

// convertUp rescales a debt from one scale to another, rounding up and
// capping at capacity (the largest debt kept), as the script does with
// doubles.
func convertUp(d, from, to, capacity int64) int64 {
	f := math.Ceil(float64(d) / float64(from) * float64(to))
	if f >= float64(capacity) {
		return capacity
	}
	return int64(f)
}
