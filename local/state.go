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
	case "", limit.TokenBucket:
		return decide(&st.Bucket, p.Bucket, TakeBucket, cost, now, op)
	case limit.GCRA:
		return decide(&st.GCRA, p.Bucket, TakeGCRA, cost, now, op)
	case limit.SlidingWindow:
		return decide(&st.Window, p.Window, TakeSlidingWindow, cost, now, op)
	case limit.FixedWindow:
		return decide(&st.Window, p.Window, TakeFixedWindow, cost, now, op)
	}
	return limit.Result{}, false, fmt.Errorf("unknown algorithm %q", p.Algorithm)
}

// decide reads the algorithm's parameters from the policy (params) and
// takes on the algorithm's state.
func decide[S, P any](st *S, params func() (P, error), take func(*S, P, int64, int64, limit.Op) (limit.Result, bool),
	cost, now int64, op limit.Op) (limit.Result, bool, error) {
	x, err := params()
	if err != nil {
		return limit.Result{}, false, err
	}
	res, changed := take(st, x, cost, now, op)
	return res, changed, nil
}
