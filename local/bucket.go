package local

import "github.com/sluice-rl/sluice/limit"

// BucketState is one token bucket in the exact units of limit.Bucket: Units
// scaled tokens, true at At (µs since the Unix epoch), measured with Scale
// units per token. The zero value is an absent bucket, which is full.
type BucketState struct {
	Units int64
	At    int64
	Scale int64
}

// TakeBucket decides cost tokens from st at now (µs since the epoch), as
// token_bucket.lua does, and reports whether st changed (an admitted take).
// With peek it spends nothing. A rejected request spends nothing.
func TakeBucket(st *BucketState, b limit.Bucket, cost int64, now int64, peek bool) (limit.Result, bool) {
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
		v = min(v, b.Capacity)
	}
	perMs := b.Refill * 1000
	res := limit.Result{Limit: b.Limit, RetryAfterMs: -1}
	changed := false
	if cost <= b.Limit {
		need := cost * b.Scale
		if v >= need {
			res.Allowed = true
			if !peek {
				v -= need
				*st = BucketState{Units: v, At: at, Scale: b.Scale}
				changed = true
			}
		} else {
			res.RetryAfterMs = ceilDiv(need-v, perMs)
		}
	}
	res.Remaining = v / b.Scale
	res.ResetAfterMs = ceilDiv(b.Capacity-v, perMs)
	return res, changed
}

// FullAt returns the time (µs) at which st is full again under b.
func (st *BucketState) FullAt(b limit.Bucket) int64 {
	if st.Scale == 0 {
		return 0
	}
	return st.At + ceilDiv(max(0, b.Capacity-st.Units), b.Refill)
}

// refill adds elapsed µs of refill to v, saturating at the capacity: the
// product is only formed when it cannot overflow.
func refill(v, elapsed int64, b limit.Bucket) int64 {
	if v >= b.Capacity || elapsed >= (b.Capacity-v+b.Refill-1)/b.Refill {
		return b.Capacity
	}
	return v + elapsed*b.Refill
}

// convert rescales units from one scale to another, rounding down, as the
// script does with doubles (exact for the magnitudes Bucket allows).
func convert(v, from, to int64) int64 {
	return int64(float64(v) / float64(from) * float64(to))
}

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}
