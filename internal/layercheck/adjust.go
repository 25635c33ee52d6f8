package layercheck

import "time"

// givenBack is the tokens of the credited give-backs of back (valid
// receipts given back: see credited) that may have been applied within
// [a, b]: every one whose [Sent, Recv] overlaps it, the most the truth
// allows.
//
// The bound with adjusts, per key, is the invariant's: admitted ≤ limit +
// rate × T + the costs of valid receipts given back (windows: per
// window). A valid give-back raises a bucket's tokens by at most its
// take's cost (never above the limit, so one applied before the interval
// adds nothing the burst does not already count), and a window's room by
// at most as much, and only the window it falls in. A give-back without a
// valid receipt earns nothing, whatever it was answered: before issue 28
// the bound was narrowed to "admitted − given back", which let any client
// give back what another spent. A positive delta is not an admission: it
// spends without a check, so it can only make later takes refused (the
// debt), never admitted; the checker gives it no credit and demands
// nothing of it.
func givenBack(back []Admission, a, b time.Time) float64 {
	var n int64
	for _, x := range back {
		if !x.Recv.Before(a) && !x.Sent.After(b) {
			n += x.Cost
		}
	}
	return float64(n)
}
