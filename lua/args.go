package lua

import (
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// Args are the script arguments that depend only on a policy: its
// algorithm's id (for Multi), its script, and the algorithm's three
// parameters, in this order in every script's ARGV. Each algorithm's
// function names them as its own (see the table in lua.go): a bucket's
// capacity, refill and scale (limit.Bucket), a window's limit, ticks and
// tick (limit.Window), a pool's limit, token_us and ttl_ms
// (limit.PoolParams), a calendar window's limit, start and lens
// (limit.CalendarWindow).
type Args struct {
	ID     int
	Script *Script
	Limit  int64 // capacity, or limit
	Rate   int64 // refill, ticks, token_us, or start
	Unit   int64 // scale, tick, ttl_ms, or lens
	// Until, when not zero, is when the parameters stop holding on
	// sluice's clock (a calendar policy's rate and unit name the windows
	// around the instant they were computed for, until the end of its
	// window); zero: for ever.
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
		return Args{ID: IDCalendar, Script: Calendar, Limit: cw.Limit, Rate: cw.Start, Unit: cw.Lens(), Until: cw.Until()}, nil
	}
	bucket := func(b limit.Bucket) Args { return Args{Limit: b.Capacity, Rate: b.Refill, Unit: b.Scale} }
	window := func(w limit.Window) Args { return Args{Limit: w.Limit, Rate: w.Ticks, Unit: w.Tick} }
	pool := func(x limit.PoolParams) Args { return Args{Limit: x.Limit, Rate: x.TokenUs, Unit: x.TTLMs} }
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
// names them as Args does (named).
func argsOf[P any](params func() (P, error), named func(P) Args, id int, script *Script) (Args, error) {
	x, err := params()
	if err != nil {
		return Args{}, err
	}
	a := named(x)
	a.ID, a.Script = id, script
	return a, nil
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
