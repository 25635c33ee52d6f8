package lua

import (
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// Args are the script arguments that depend only on a policy: its
// algorithm's id (for Multi), its script, and a1..a3.
type Args struct {
	ID     int
	Script *Script
	A      [3]int64
	// Until, when not zero, is when A stops holding on sluice's clock (a
	// calendar policy's a2 and a3 name the windows around the instant they
	// were computed for, until the end of its window); zero: for ever.
	Until time.Time
}

// ArgsFor returns p's script arguments at this instant of sluice's clock
// (ArgsAt), or the error that makes p unrepresentable (the config refuses
// such policies).
func ArgsFor(p *limit.Policy) (Args, error) { return ArgsAt(p, time.Now()) }

// ArgsAt returns p's script arguments at now, sluice's clock: only a
// calendar policy's depend on it (see Args.Until).
func ArgsAt(p *limit.Policy, now time.Time) (Args, error) {
	if p.Calendar != "" {
		if p.Algorithm != limit.FixedWindow {
			return Args{}, fmt.Errorf("a calendar needs algorithm fixed_window, not %q", p.Algorithm)
		}
		cw, err := p.CalendarAt(now)
		if err != nil {
			return Args{}, err
		}
		return Args{ID: IDCalendar, Script: Calendar, A: [3]int64{cw.Limit, cw.Start, cw.Lens()}, Until: cw.Until()}, nil
	}
	bucket := func(b limit.Bucket) [3]int64 { return [3]int64{b.Capacity, b.Refill, b.Scale} }
	window := func(w limit.Window) [3]int64 { return [3]int64{w.Limit, w.Ticks, w.Tick} }
	pool := func(x limit.PoolParams) [3]int64 { return [3]int64{x.Limit, x.TokenUs, x.TTLMs} }
	switch p.Algorithm {
	case "", limit.TokenBucket:
		return argsOf(p.Bucket, bucket, IDTokenBucket, TokenBucket)
	case limit.GCRA:
		return argsOf(p.Bucket, bucket, IDGCRA, GCRA)
	case limit.SlidingWindow:
		return argsOf(p.Window, window, IDSlidingWindow, SlidingWindow)
	case limit.FixedWindow:
		return argsOf(p.Window, window, IDFixedWindow, FixedWindow)
	case limit.Pool:
		return argsOf(p.Pool, pool, IDPool, Pool)
	}
	return Args{}, fmt.Errorf("unknown algorithm %q", p.Algorithm)
}

// argsOf reads the algorithm's parameters from the policy (params) and
// lays them out as a1..a3.
func argsOf[P any](params func() (P, error), a func(P) [3]int64, id int, script *Script) (Args, error) {
	x, err := params()
	if err != nil {
		return Args{}, err
	}
	return Args{ID: id, Script: script, A: a(x)}, nil
}

// ScriptOp returns the cost and op (0 take … 3 return) the scripts decide
// op for cost by. Every op is its own number but OpAdjust, which the
// scripts know as a return of -cost to the current window: a give-back
// when the delta is negative, a spend without a check (into debt) when it
// is positive (see bucket.lua's spend_units, window.lua's decide_window).
// A return of a negative cost is nothing else.
func ScriptOp(op limit.Op, cost int64) (int64, int) {
	if op == limit.OpAdjust {
		return -cost, int(limit.OpReturn)
	}
	return cost, int(op)
}
