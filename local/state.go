package local

import (
	"fmt"

	"github.com/sluice-rl/sluice/limit"
)

// State is one key's state under any algorithm; only the field of the
// key's algorithm is used. The zero value is an absent key.
type State struct {
	Bucket BucketState // token_bucket
	GCRA   GCRAState   // gcra
	Window WindowState // sliding_window and fixed_window
}

// Decide decides op for cost on st at now (µs since the epoch) by p's
// algorithm, exactly as the algorithm's Lua script does, and reports
// whether st changed.
func Decide(st *State, p *limit.Policy, cost, now int64, op limit.Op) (limit.Result, bool, error) {
	switch p.Algorithm {
	case "", limit.TokenBucket, limit.GCRA:
		b, err := p.Bucket()
		if err != nil {
			return limit.Result{}, false, err
		}
		if p.Algorithm == limit.GCRA {
			res, changed := TakeGCRA(&st.GCRA, b, cost, now, op)
			return res, changed, nil
		}
		res, changed := TakeBucket(&st.Bucket, b, cost, now, op)
		return res, changed, nil
	case limit.SlidingWindow, limit.FixedWindow:
		w, err := p.Window()
		if err != nil {
			return limit.Result{}, false, err
		}
		if p.Algorithm == limit.SlidingWindow {
			res, changed := TakeSlidingWindow(&st.Window, w, cost, now, op)
			return res, changed, nil
		}
		res, changed := TakeFixedWindow(&st.Window, w, cost, now, op)
		return res, changed, nil
	}
	return limit.Result{}, false, fmt.Errorf("unknown algorithm %q", p.Algorithm)
}
