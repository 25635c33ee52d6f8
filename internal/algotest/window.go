package algotest

import (
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// Windows are aligned to the Unix epoch. T0 is 1,700,000,000 s: the start
// of a 1 ms, 1 s, 2 s or 10 s window, 20 s into its minute, 800 s into its
// hour and 80,000 s into its day (which ends at T0 + 6400 s).

// SlidingWindow is the table for sliding_window. With P ticks a window, e
// ticks elapsed in it, p and c the previous and current counts, the
// estimate is p×(P−e)/P + c; reset is the end of the next window while
// c > 0, else the end of this one while p > 0.
var SlidingWindow = []Vector{
	{
		Name:   "fresh key",
		Policy: sw(10, time.Second),
		Steps: []Step{
			{Cost: 1, Want: Want{true, 9, -1, 2000, 0}},
			{At: 250 * ms, Cost: 2, Want: Want{true, 7, -1, 1750, 0}},
		},
	},
	{
		Name:   "the previous window weighs by the share still inside",
		Policy: sw(10, time.Second),
		Steps: []Step{
			{Cost: 10, Want: Want{true, 0, -1, 2000, 0}},
			// 1 fits at +1.1s, when 10×0.9 + 1 = 10
			{At: 500 * ms, Cost: 1, Want: Want{false, 0, 600, 1500, 0}},
			// 25% into window 1 the estimate is 7.5: 2 more, not 3; 3 fit at +1.3s
			{At: 1250 * ms, Cost: 3, Want: Want{false, 2, 50, 750, 0}},
			{At: 1250 * ms, Cost: 2, Want: Want{true, 0, -1, 1750, 0}},
			{At: 1250 * ms, Cost: 1, Want: Want{false, 0, 50, 1750, 0}},
			{At: 1300 * ms, Cost: 1, Want: Want{true, 0, -1, 1700, 0}},
			// window 2: the 3 of window 1 weigh fully at its start
			{At: 2000 * ms, Cost: 4, Want: Want{true, 3, -1, 2000, 0}},
		},
	},
	{
		Name:   "rejection spends nothing, retry rounds up and is never 0",
		Policy: sw(3, time.Minute), // window 0 is [T0-20s, T0+40s)
		Steps: []Step{
			{Cost: 3, Want: Want{true, 0, -1, 100_000, 0}},
			// 1 fits when 3×(P−e)/P <= 2 in window 1: e = P/3, at T0+60s
			{At: 1, Cost: 1, Want: Want{false, 0, 60_000, 100_000, 0}},
			{At: 1, Cost: 1, Want: Want{false, 0, 60_000, 100_000, 0}},
			{At: 60_000*ms - 1, Cost: 1, Want: Want{false, 0, 1, 40_001, 0}},
			{At: 60_000 * ms, Cost: 1, Want: Want{true, 0, -1, 100_000, 0}},
		},
	},
	{
		Name:   "no burst at the window boundary",
		Policy: sw(5, time.Second),
		Steps: []Step{
			{At: 999 * ms, Cost: 5, Want: Want{true, 0, -1, 1001, 0}},
			{At: 1000 * ms, Cost: 1, Want: Want{false, 0, 200, 1000, 0}},
			{At: 1200 * ms, Cost: 1, Want: Want{true, 0, -1, 1800, 0}},
			// two windows later nothing weighs
			{At: 3000 * ms, Cost: 5, Want: Want{true, 0, -1, 2000, 0}},
		},
	},
	costAboveLimit(sw(10, time.Second), 2000),
	{
		Name:   "peek spends nothing",
		Policy: sw(10, time.Second),
		Steps: []Step{
			{Cost: 4, Peek: true, Want: Want{true, 10, -1, 0, 0}},
			{Cost: 4, Want: Want{true, 6, -1, 2000, 0}},
			// 7 fit at +1.25s, when 4×0.75 + 7 = 10
			{At: 400 * ms, Cost: 7, Peek: true, Want: Want{false, 6, 850, 1600, 0}},
			{At: 400 * ms, Cost: 6, Peek: true, Want: Want{true, 6, -1, 1600, 0}},
			{At: 400 * ms, Cost: 6, Want: Want{true, 0, -1, 1600, 0}},
		},
	},
	{
		Name:   "claims grant what fits, returns give it back",
		Policy: sw(10, time.Second),
		Steps: []Step{
			{Cost: 4, Op: limit.OpClaim, Want: Want{true, 6, -1, 2000, 4}},
			{Cost: 8, Op: limit.OpClaim, Want: Want{true, 0, -1, 2000, 6}},
			{Cost: 1, Op: limit.OpClaim, Want: Want{false, 0, 1100, 2000, 0}},
			{At: 300 * ms, Cost: 3, Op: limit.OpReturn, Want: Want{true, 3, -1, 1700, 0}},
			{At: 300 * ms, Cost: 1, Want: Want{true, 2, -1, 1700, 0}},
			{At: 300 * ms, Cost: 100, Op: limit.OpReturn, Want: Want{true, 10, -1, 0, 0}},
			{At: 1500 * ms, Cost: 12, Op: limit.OpClaim, Want: Want{true, 0, -1, 1500, 10}},
			// 25% into the next window 7.5 weigh: 2 of 5 are granted
			{At: 2250 * ms, Cost: 5, Op: limit.OpClaim, Want: Want{true, 0, -1, 1750, 2}},
			{At: 2250 * ms, Cost: 1, Op: limit.OpReturn, Want: Want{true, 1, -1, 1750, 0}},
			// the current count goes, the previous one still weighs
			{At: 2250 * ms, Cost: 5, Op: limit.OpReturn, Want: Want{true, 2, -1, 750, 0}},
		},
	},
	{
		Name:   "one per hour",
		Policy: sw(1, time.Hour), // window 0 ends at T0+2800s, window 1 at T0+6400s
		Steps: []Step{
			{Cost: 1, Want: Want{true, 0, -1, 6_400_000, 0}},
			// the take weighs until window 1 ends
			{At: 1000 * ms, Cost: 1, Want: Want{false, 0, 6_399_000, 6_399_000, 0}},
			{At: 6_400_000*ms - 1, Cost: 1, Want: Want{false, 0, 1, 1, 0}},
			{At: 6_400_000 * ms, Cost: 1, Want: Want{true, 0, -1, 7_200_000, 0}},
		},
	},
	{
		Name:   "ten million per second",
		Policy: sw(10_000_000, time.Second),
		Steps: []Step{
			{Cost: 10_000_000, Want: Want{true, 0, -1, 2000, 0}},
			{At: 1000 * ms, Cost: 1, Want: Want{false, 0, 1, 1000, 0}},
			// one µs later 10 have decayed
			{At: 1000*ms + 1, Cost: 10, Want: Want{true, 0, -1, 2000, 0}},
			{At: 1000*ms + 1, Cost: 1, Want: Want{false, 0, 1, 2000, 0}},
			{At: 1500 * ms, Cost: 4_999_991, Want: Want{false, 4_999_990, 1, 1500, 0}},
			{At: 1500 * ms, Cost: 4_999_990, Want: Want{true, 0, -1, 1500, 0}},
		},
	},
	{
		Name:   "a day window counts in ms ticks",
		Policy: sw(100_000, 24*time.Hour), // window 0 ends at T0+6400s
		Steps: []Step{
			{Cost: 100_000, Want: Want{true, 0, -1, 92_800_000, 0}},
			// 25% into window 1: 75,000 weigh; 25,001 fit 864 ms later
			{At: 28_000_000 * ms, Cost: 25_001, Want: Want{false, 25_000, 864, 64_800_000, 0}},
			{At: 28_000_000 * ms, Cost: 25_000, Want: Want{true, 0, -1, 151_200_000, 0}},
			// half a tick later: the same tick, 863.5 ms rounds up
			{At: 28_000_000*ms + 500, Cost: 1, Want: Want{false, 0, 864, 151_200_000, 0}},
		},
	},
	{
		Name:   "clock going backwards stays in the window, counts nothing twice",
		Policy: sw(10, time.Second),
		Steps: []Step{
			{At: 1500 * ms, Cost: 10, Want: Want{true, 0, -1, 1500, 0}},
			// back into window 0: read as the start of window 1
			{At: 900 * ms, Cost: 1, Want: Want{false, 0, 1200, 2100, 0}},
			{At: 900 * ms, Cost: 4, Op: limit.OpReturn, Want: Want{true, 4, -1, 2100, 0}},
			{At: 1600 * ms, Cost: 4, Want: Want{true, 0, -1, 1400, 0}},
			{At: 2500 * ms, Cost: 5, Peek: true, Want: Want{true, 5, -1, 500, 0}},
		},
	},
	{
		Name:   "policy change clamps to the new limit and keeps the window",
		Policy: sw(10, time.Second),
		Steps: []Step{
			{Cost: 8, Want: Want{true, 2, -1, 2000, 0}},
			// limit 5: the count 8 is clamped to 5
			{At: 500 * ms, Cost: 1, Policy: sw(5, time.Second), Want: Want{false, 0, 700, 1500, 0}},
			{At: 500 * ms, Cost: 10, Policy: sw(20, time.Second), Want: Want{true, 2, -1, 1500, 0}},
			// period 2s: window [T0, T0+2s) contains the stored one; 3 fit at +2.111112s
			{At: 1500 * ms, Cost: 3, Policy: sw(20, 2*time.Second), Want: Want{false, 2, 612, 2500, 0}},
			{At: 1500 * ms, Cost: 2, Want: Want{true, 0, -1, 2500, 0}},
			// back to 10 per 1s: the stored window started at T0, before the
			// previous window [T0+1s, T0+2s), so its 20 are forgotten
			{At: 2500 * ms, Cost: 5, Policy: sw(10, time.Second), Want: Want{true, 5, -1, 1500, 0}},
			// the next window: the 5 weigh, 25% spent: 3.75 + 6 = 9.75
			{At: 3250 * ms, Cost: 6, Want: Want{true, 0, -1, 1750, 0}},
			// 1 more fits at +3.4s, when 5×0.6 + 6 + 1 = 10
			{At: 3250 * ms, Cost: 1, Want: Want{false, 0, 150, 1750, 0}},
		},
	},
}

// FixedWindow is the table for fixed_window: c the count of the current
// window; retry and reset are the ms until it ends.
var FixedWindow = []Vector{
	{
		Name:   "fresh key",
		Policy: fw(10, time.Second),
		Steps: []Step{
			{Cost: 1, Want: Want{true, 9, -1, 1000, 0}},
			{At: 250 * ms, Cost: 2, Want: Want{true, 7, -1, 750, 0}},
		},
	},
	{
		Name:   "fill, reject spends nothing, next window",
		Policy: fw(10, time.Second),
		Steps: []Step{
			{At: 100 * ms, Cost: 10, Want: Want{true, 0, -1, 900, 0}},
			{At: 100 * ms, Cost: 1, Want: Want{false, 0, 900, 900, 0}},
			{At: 100 * ms, Cost: 1, Want: Want{false, 0, 900, 900, 0}},
			{At: 1000*ms - 1, Cost: 1, Want: Want{false, 0, 1, 1, 0}},
			{At: 1000 * ms, Cost: 1, Want: Want{true, 9, -1, 1000, 0}},
			{At: 1000*ms + 1, Cost: 9, Want: Want{true, 0, -1, 1000, 0}},
		},
	},
	{
		Name:   "a burst of twice the limit across the boundary",
		Policy: fw(5, time.Second),
		Steps: []Step{
			{At: 999 * ms, Cost: 5, Want: Want{true, 0, -1, 1, 0}},
			{At: 1000 * ms, Cost: 5, Want: Want{true, 0, -1, 1000, 0}},
		},
	},
	{
		Name:   "retry and reset round up",
		Policy: fw(3, time.Minute), // the window ends at T0+40s
		Steps: []Step{
			{Cost: 3, Want: Want{true, 0, -1, 40_000, 0}},
			{At: 1, Cost: 1, Want: Want{false, 0, 40_000, 40_000, 0}},
			{At: 39_999*ms + 1, Cost: 1, Want: Want{false, 0, 1, 1, 0}},
			{At: 40_000 * ms, Cost: 1, Want: Want{true, 2, -1, 60_000, 0}},
		},
	},
	costAboveLimit(fw(10, time.Second), 1000),
	{
		Name:   "peek spends nothing",
		Policy: fw(10, time.Second),
		Steps: []Step{
			{Cost: 4, Peek: true, Want: Want{true, 10, -1, 0, 0}},
			{Cost: 4, Want: Want{true, 6, -1, 1000, 0}},
			{At: 400 * ms, Cost: 7, Peek: true, Want: Want{false, 6, 600, 600, 0}},
			{At: 400 * ms, Cost: 6, Peek: true, Want: Want{true, 6, -1, 600, 0}},
			{At: 400 * ms, Cost: 6, Want: Want{true, 0, -1, 600, 0}},
		},
	},
	{
		Name:   "claims grant what is left, returns give it back",
		Policy: fw(10, time.Second),
		Steps: []Step{
			{Cost: 4, Op: limit.OpClaim, Want: Want{true, 6, -1, 1000, 4}},
			{Cost: 8, Op: limit.OpClaim, Want: Want{true, 0, -1, 1000, 6}},
			{Cost: 1, Op: limit.OpClaim, Want: Want{false, 0, 1000, 1000, 0}},
			{At: 300 * ms, Cost: 1, Op: limit.OpClaim, Want: Want{false, 0, 700, 700, 0}},
			{At: 300 * ms, Cost: 3, Op: limit.OpReturn, Want: Want{true, 3, -1, 700, 0}},
			{At: 300 * ms, Cost: 1, Want: Want{true, 2, -1, 700, 0}},
			{At: 300 * ms, Cost: 100, Op: limit.OpReturn, Want: Want{true, 10, -1, 0, 0}},
			{At: 300 * ms, Cost: 12, Op: limit.OpClaim, Want: Want{true, 0, -1, 700, 10}},
			{At: 1000 * ms, Cost: 5, Op: limit.OpReturn, Want: Want{true, 10, -1, 0, 0}},
		},
	},
	{
		Name:   "one per hour",
		Policy: fw(1, time.Hour), // the window ends at T0+2800s
		Steps: []Step{
			{Cost: 1, Want: Want{true, 0, -1, 2_800_000, 0}},
			{At: 1000 * ms, Cost: 1, Want: Want{false, 0, 2_799_000, 2_799_000, 0}},
			{At: 2_800_000*ms - 1, Cost: 1, Want: Want{false, 0, 1, 1, 0}},
			{At: 2_800_000 * ms, Cost: 1, Want: Want{true, 0, -1, 3_600_000, 0}},
		},
	},
	{
		Name:   "ten million per second",
		Policy: fw(10_000_000, time.Second),
		Steps: []Step{
			{Cost: 9_999_999, Want: Want{true, 1, -1, 1000, 0}},
			{At: 1, Cost: 2, Want: Want{false, 1, 1000, 1000, 0}},
			{At: 1, Cost: 1, Want: Want{true, 0, -1, 1000, 0}},
			{At: 1000*ms - 1, Cost: 1, Want: Want{false, 0, 1, 1, 0}},
			{At: 1000 * ms, Cost: 10_000_000, Want: Want{true, 0, -1, 1000, 0}},
			{At: 1000 * ms, Cost: 10_000_001, Want: Want{false, 0, -1, 1000, 0}},
		},
	},
	{
		Name:   "a day window",
		Policy: fw(1000, 24*time.Hour), // the window ends at T0+6400s
		Steps: []Step{
			{Cost: 1000, Want: Want{true, 0, -1, 6_400_000, 0}},
			{At: 6_399_999 * ms, Cost: 1, Want: Want{false, 0, 1, 1, 0}},
			{At: 6_400_000 * ms, Cost: 1, Want: Want{true, 999, -1, 86_400_000, 0}},
		},
	},
	{
		Name:   "clock going backwards stays in the window",
		Policy: fw(10, time.Second),
		Steps: []Step{
			{At: 1500 * ms, Cost: 10, Want: Want{true, 0, -1, 500, 0}},
			// back into window 0: read as the start of window 1, which ends 1.1s later
			{At: 900 * ms, Cost: 1, Want: Want{false, 0, 1100, 1100, 0}},
			{At: 900 * ms, Cost: 2, Op: limit.OpReturn, Want: Want{true, 2, -1, 1100, 0}},
			{At: 1600 * ms, Cost: 3, Want: Want{false, 2, 400, 400, 0}},
			{At: 2000 * ms, Cost: 1, Want: Want{true, 9, -1, 1000, 0}},
		},
	},
	{
		Name:   "policy change clamps to the new limit",
		Policy: fw(10, time.Second),
		Steps: []Step{
			{Cost: 6, Want: Want{true, 4, -1, 1000, 0}},
			// limit 4: the count 6 is clamped to 4
			{At: 100 * ms, Cost: 1, Policy: fw(4, time.Second), Want: Want{false, 0, 900, 900, 0}},
			{At: 100 * ms, Cost: 10, Policy: fw(20, time.Second), Want: Want{true, 4, -1, 900, 0}},
			// period 1 minute: its window [T0-20s, T0+40s) contains the stored one
			{At: 200 * ms, Cost: 5, Policy: fw(20, time.Minute), Want: Want{false, 4, 39_800, 39_800, 0}},
			{At: 200 * ms, Cost: 4, Want: Want{true, 0, -1, 39_800, 0}},
			// back to 1s: the minute window started before [T0, T0+1s) and is forgotten
			{At: 300 * ms, Cost: 20, Policy: fw(20, time.Second), Want: Want{true, 0, -1, 700, 0}},
		},
	},
}
