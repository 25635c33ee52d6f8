package layercheck

import "time"

// givenBack is the tokens of the give-backs of back (RL.ADJUST with a
// negative delta) that may have been applied within [a, b]: every one
// whose [Sent, Recv] overlaps it, the most the truth allows.
//
// The bound with adjusts, per key: admitted − given back ≤ limit + rate ×
// T (windows: per window). A give-back raises a bucket's tokens by at most
// what it gives (never above the limit, so one applied before the
// interval adds nothing the burst does not already count), and a window's
// room by at most as much, and only the window it falls in. A positive
// delta is not an admission: it spends without a check, so it can only
// make later takes refused (the debt), never admitted; the checker gives
// it no credit and demands nothing of it.
func givenBack(back []Admission, a, b time.Time) float64 {
	var n int64
	for _, x := range back {
		if !x.Recv.Before(a) && !x.Sent.After(b) {
			n += x.Cost
		}
	}
	return float64(n)
}
