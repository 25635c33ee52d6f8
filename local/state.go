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
	Window WindowState // sliding_window and fixed_window, calendar windows too
	Pool   PoolState   // pool
	Slots  *SlotState  // concurrency (concurrency.go); nil when none
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
	kindCalendar // see calendar.go
	kindSlots    // a concurrency limit's slots
)

func kindOf(a limit.Algorithm) kind {
	switch a {
	case limit.GCRA:
		return kindGCRA
	case limit.SlidingWindow, limit.FixedWindow:
		return kindWindow
	case limit.Pool:
		return kindPool
	case limit.Concurrency:
		return kindSlots
	}
	return kindBucket
}

// Input is what Decide decides: an operation of a cost under a policy,
// at an instant.
type Input struct {
	Policy *limit.Policy
	Op     limit.Op
	Cost   int64 // tokens; of an OpAdjust, the signed delta
	// Now is the store's clock, µs since the epoch: the instant decided at.
	Now int64
	// SluiceNow is sluice's clock (µs since the epoch), apart from the
	// store's: a calendar policy's windows are computed at it, as the
	// cluster store computes the script's arguments, and the decision
	// falls in the window of Now, as in calendar.lua. The other
	// algorithms ignore it. 0 means Now.
	SluiceNow int64
	// From is, for an OpReturn, the window its tokens were taken in
	// (limit.Request.Window; 0: the current one), for an OpClaim the time
	// it holds a bucket until (limit.Request.Hold; 0: none).
	From int64
}

// Decide decides in.Op for in.Cost on st at in.Now by in.Policy's
// algorithm, exactly as the algorithm's Lua script does, and reports
// whether st changed.
//
// An OpAdjust of delta (Cost) is decided as the scripts decide it
// (lua.ScriptOp): an OpReturn of -delta to the current window. A negative
// delta gives back, never above the limit; a positive one is a return of
// a negative cost, a spend without a check that may leave a bucket in
// debt (at most one capacity) and a window full.
func Decide(st *State, in Input) (limit.Result, bool, error) {
	sluiceNow := in.SluiceNow
	if sluiceNow == 0 {
		sluiceNow = in.Now
	}
	return decideFrom(st, in.Policy, in.Cost, in.Now, sluiceNow, in.Op, in.From)
}

// decideFrom is Decide with the fields of Input.
func decideFrom(st *State, p *limit.Policy, cost, now, sluiceNow int64, op limit.Op, from int64) (limit.Result, bool, error) {
	if op == limit.OpAdjust {
		cost, op, from = -cost, limit.OpReturn, 0
	}
	k := kindOfPolicy(p)
	if st.kind == k || st.kind == kindNone {
		res, changed, err := decideAny(st, p, cost, now, sluiceNow, op, from)
		if changed {
			st.kind = k
			if *st == (State{kind: k}) {
				st.kind = kindNone // deleted: the same as no key
			}
		}
		return res, changed, err
	}
	// Written by another algorithm (the key's policy changed algorithm):
	// never read as full, but as spent at now, as state.lua's fields.
	fresh, err := spent(k, p, now)
	if err != nil {
		return limit.Result{}, false, err
	}
	if op == limit.OpReturn && cost >= 0 && k != kindPool {
		// A return to another algorithm's state gives nothing: its tokens
		// came from a state that is gone (as state.lua's decide); the
		// reply is a peek of nothing on the spent state. A pool's fill is
		// how its tokens come in; a negative cost is a spend.
		res, _, err := decideAny(&fresh, p, 0, now, sluiceNow, limit.OpPeek, 0)
		return res, false, err
	}
	res, changed, err := decideAny(&fresh, p, cost, now, sluiceNow, op, from)
	if changed {
		*st = fresh
		if fresh != (State{}) {
			st.kind = k
		}
	}
	return res, changed, err
}

// spent is the state of kind k that a key written by another algorithm
// reads as under p: a bucket empty at now, a window whose count is its
// limit, a pool empty (the same as none).
func spent(k kind, p *limit.Policy, now int64) (State, error) {
	switch k {
	case kindBucket, kindGCRA:
		b, err := p.Bucket()
		if err != nil {
			return State{}, err
		}
		if k == kindBucket {
			return State{Bucket: BucketState{Units: 0, At: now, Scale: b.Scale}, kind: k}, nil
		}
		return State{GCRA: GCRAState{At: now, Debt: b.Capacity, Scale: b.Scale}, kind: k}, nil
	case kindWindow:
		w, err := p.Window()
		if err != nil {
			return State{}, err
		}
		return State{Window: WindowState{W: now, C: w.Limit}, kind: k}, nil
	case kindCalendar: // a count taken just after now: in the current window
		return State{Window: WindowState{W: now + 1, C: p.Limit}, kind: k}, nil
	}
	return State{}, nil
}

// decideAny decides by p's algorithm on its field of st.
func decideAny(st *State, p *limit.Policy, cost, now, sluiceNow int64, op limit.Op, from int64) (limit.Result, bool, error) {
	if p.Calendar != "" {
		if p.Algorithm != limit.FixedWindow {
			return limit.Result{}, false, fmt.Errorf("a calendar needs algorithm fixed_window, not %q", p.Algorithm)
		}
		return decideCalendar(st, p, cost, now, sluiceNow, op, from)
	}
	switch p.Algorithm {
	case "", limit.TokenBucket:
		return decide(&st.Bucket, p.Bucket, takeBucket, cost, now, op, from)
	case limit.GCRA:
		return decide(&st.GCRA, p.Bucket, takeGCRA, cost, now, op, from)
	case limit.SlidingWindow:
		return decide(&st.Window, p.Window, takeSlidingWindow, cost, now, op, from)
	case limit.FixedWindow:
		return decide(&st.Window, p.Window, takeFixedWindow, cost, now, op, from)
	case limit.Pool:
		return decide(&st.Pool, p.Pool, takePool, cost, now, op, from)
	}
	return limit.Result{}, false, fmt.Errorf("unknown algorithm %q", p.Algorithm)
}

// decide reads the algorithm's parameters from the policy (params) and
// takes on the algorithm's state, with from as the algorithm reads it
// (the window a return names, the hold of a claim).
func decide[S, P any](st *S, params func() (P, error), take func(*S, P, int64, int64, limit.Op, int64) (limit.Result, bool),
	cost, now int64, op limit.Op, from int64) (limit.Result, bool, error) {
	x, err := params()
	if err != nil {
		return limit.Result{}, false, err
	}
	res, changed := take(st, x, cost, now, op, from)
	return res, changed, nil
}
