package local

import (
	"fmt"

	"github.com/sluice-rl/sluice/limit"
)

// State is one key's state under any algorithm; only the field of the
// algorithm that wrote it last is used. The zero value is an absent key.
type State struct {
	Bucket BucketState // token_bucket
	GCRA   GCRAState   // gcra
	Window WindowState // sliding_window and fixed_window
	Pool   PoolState   // pool
	kind   kind        // which of them holds the state
}

// kind is the family whose fields hold a State, as the Lua state's tag:
// a key decided under another algorithm than the one that wrote it reads
// as no state (the two windows share theirs).
type kind uint8

const (
	kindNone kind = iota
	kindBucket
	kindGCRA
	kindWindow
	kindPool
)

func kindOf(a limit.Algorithm) kind {
	switch a {
	case limit.GCRA:
		return kindGCRA
	case limit.SlidingWindow, limit.FixedWindow:
		return kindWindow
	case limit.Pool:
		return kindPool
	}
	return kindBucket
}

// Decide decides op for cost on st at now (µs since the epoch) by p's
// algorithm, exactly as the algorithm's Lua script does, and reports
// whether st changed.
func Decide(st *State, p *limit.Policy, cost, now int64, op limit.Op) (limit.Result, bool, error) {
	k := kindOf(p.Algorithm)
	if st.kind == k || st.kind == kindNone {
		res, changed, err := decideAny(st, p, cost, now, op)
		if changed {
			st.kind = k
			if *st == (State{kind: k}) {
				st.kind = kindNone // deleted: the same as no key
			}
		}
		return res, changed, err
	}
	var fresh State // written by another algorithm: as none, until this one writes
	res, changed, err := decideAny(&fresh, p, cost, now, op)
	if changed {
		*st = fresh
		if fresh != (State{}) {
			st.kind = k
		}
	}
	return res, changed, err
}

// decideAny decides by p's algorithm on its field of st.
func decideAny(st *State, p *limit.Policy, cost, now int64, op limit.Op) (limit.Result, bool, error) {
	switch p.Algorithm {
	case "", limit.TokenBucket:
		return decide(&st.Bucket, p.Bucket, TakeBucket, cost, now, op)
	case limit.GCRA:
		return decide(&st.GCRA, p.Bucket, TakeGCRA, cost, now, op)
	case limit.SlidingWindow:
		return decide(&st.Window, p.Window, TakeSlidingWindow, cost, now, op)
	case limit.FixedWindow:
		return decide(&st.Window, p.Window, TakeFixedWindow, cost, now, op)
	case limit.Pool:
		return decide(&st.Pool, p.Pool, TakePool, cost, now, op)
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
