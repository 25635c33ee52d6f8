package algotest

import (
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// GCRA is the table for gcra. GCRA is the token bucket's limit kept as a
// theoretical arrival time (TAT), so for one policy every reply is the
// bucket's; the comments give each policy's units (limit.Bucket) and the
// debt TAT - now in units, from which the replies follow.
var GCRA = []Vector{
	{
		// redis-cell's CL.THROTTLE example: max_burst 15 is limit 16, 30
		// per 60 s is one token per 2 s. Scale 2,000,000, refill 1/µs.
		Name:   "redis-cell example, limit 16 at 30 per minute",
		Policy: gcraP(16, 30, time.Minute),
		Steps: []Step{
			{Cost: 1, Want: Want{true, 15, -1, 2000, 0}},
			{Cost: 15, Want: Want{true, 0, -1, 32_000, 0}},
			{Cost: 1, Want: Want{false, 0, 2000, 32_000, 0}},
			// debt 30,000,001: one unit short of a token
			{At: 1_999_999, Cost: 1, Want: Want{false, 0, 1, 30_001, 0}},
			{At: 2000 * ms, Cost: 1, Want: Want{true, 0, -1, 32_000, 0}},
		},
	},
	{
		// scale 200,000 (one token per 200 ms), refill 1/µs, capacity 2,000,000
		Name:   "drain, reject spends nothing, refill",
		Policy: gcraP(10, 5, time.Second),
		Steps: []Step{
			{Cost: 10, Want: Want{true, 0, -1, 2000, 0}},
			{Cost: 1, Want: Want{false, 0, 200, 2000, 0}},
			{At: 150 * ms, Cost: 1, Want: Want{false, 0, 50, 1850, 0}},
			{At: 200 * ms, Cost: 2, Want: Want{false, 1, 200, 1800, 0}},
			{At: 200 * ms, Cost: 1, Want: Want{true, 0, -1, 2000, 0}},
			{At: 1200 * ms, Cost: 1, Want: Want{true, 4, -1, 1200, 0}},
		},
	},
	{
		// 7 per second: scale 1,000,000, refill 7/µs; the emission interval
		// is 142,857 1/7 µs, kept exactly
		Name:   "seven per second, limit 1: the TAT to a seventh of a µs, retry rounded up",
		Policy: gcraP(1, 7, time.Second),
		Steps: []Step{
			{Cost: 1, Want: Want{true, 0, -1, 143, 0}},
			{At: 1, Cost: 1, Want: Want{false, 0, 143, 143, 0}},
			{At: 142_857, Cost: 1, Want: Want{false, 0, 1, 1, 0}},
			{At: 142_858, Cost: 1, Want: Want{true, 0, -1, 143, 0}},
		},
	},
	{
		// One owner per stored state: a limit that shrinks and grows back
		// forgives no debt. Capped at the smaller burst, the debt of 4
		// tokens became 3, and the larger limit then found 2 tokens where
		// 1 was left.
		Name:   "a limit that shrinks and grows back forgives no debt",
		Policy: gcraP(5, 5, 2*time.Second), // scale 400,000, refill 1
		Steps: []Step{
			{Cost: 4, Want: Want{true, 1, -1, 1600, 0}},
			// scale 1,000,000, refill 3, capacity 3,000,000: owes 4,000,000
			{Cost: 1, Peek: true, Policy: gcraP(3, 6, 2*time.Second), Want: Want{false, 0, 667, 1334, 0}},
			{Cost: 0, Op: limit.OpReturn, Policy: gcraP(3, 6, 2*time.Second), Want: Want{true, 0, -1, 1334, 0}},
			{Cost: 2, Policy: gcraP(5, 5, 2*time.Second), Want: Want{false, 1, 400, 1600, 0}},
			{Cost: 1, Policy: gcraP(5, 5, 2*time.Second), Want: Want{true, 0, -1, 2000, 0}},
		},
	},
	{
		// scale 1,000,000, refill 1/µs, capacity 5,000,000
		Name:   "cost above limit can never succeed, a claim takes what exists",
		Policy: gcraP(5, 1, time.Second),
		Steps: []Step{
			{Cost: 6, Want: Want{false, 5, -1, 0, 0}},
			{Cost: 6, Peek: true, Want: Want{false, 5, -1, 0, 0}},
			{Cost: 5, Want: Want{true, 0, -1, 5000, 0}},
			{Cost: 6, Want: Want{false, 0, -1, 5000, 0}},
			{Cost: 6, Op: limit.OpClaim, Want: Want{false, 0, 1000, 5000, 0}},
			{At: 2000 * ms, Cost: 6, Op: limit.OpClaim, Want: Want{true, 0, -1, 5000, 2}},
		},
	},
	{
		// scale 100,000, refill 1/µs, capacity 1,000,000
		Name:   "peek spends nothing",
		Policy: gcraP(10, 10, time.Second),
		Steps: []Step{
			{Cost: 4, Peek: true, Want: Want{true, 10, -1, 0, 0}},
			{Cost: 4, Want: Want{true, 6, -1, 400, 0}},
			{Cost: 7, Peek: true, Want: Want{false, 6, 100, 400, 0}},
			{Cost: 6, Peek: true, Want: Want{true, 6, -1, 400, 0}},
			{At: 50 * ms, Cost: 7, Peek: true, Want: Want{false, 6, 50, 350, 0}},
			{At: 50 * ms, Cost: 6, Want: Want{true, 0, -1, 950, 0}},
		},
	},
	{
		// scale 100,000, refill 1/µs, capacity 1,000,000
		Name:   "claims grant what exists, returns give it back",
		Policy: gcraP(10, 10, time.Second),
		Steps: []Step{
			{Cost: 4, Op: limit.OpClaim, Want: Want{true, 6, -1, 400, 4}},
			{Cost: 8, Op: limit.OpClaim, Want: Want{true, 0, -1, 1000, 6}},
			{Cost: 1, Op: limit.OpClaim, Want: Want{false, 0, 100, 1000, 0}},
			{At: 30 * ms, Cost: 3, Op: limit.OpReturn, Want: Want{true, 3, -1, 670, 0}},
			{At: 30 * ms, Cost: 100, Op: limit.OpReturn, Want: Want{true, 10, -1, 0, 0}},
			{At: 30 * ms, Cost: 10, Want: Want{true, 0, -1, 1000, 0}},
			{At: 30 * ms, Cost: 9, Op: limit.OpReturn, Want: Want{true, 9, -1, 100, 0}},
			{At: 130 * ms, Cost: 10, Peek: true, Want: Want{true, 10, -1, 0, 0}},
		},
	},
	{
		// scale 3,600,000,000, refill 1/µs, capacity 7,200,000,000
		Name:   "one per hour, burst 2",
		Policy: gcraP(2, 1, time.Hour),
		Steps: []Step{
			{Cost: 1, Want: Want{true, 1, -1, 3_600_000, 0}},
			{Cost: 1, Want: Want{true, 0, -1, 7_200_000, 0}},
			{At: 1000 * ms, Cost: 1, Want: Want{false, 0, 3_599_000, 7_199_000, 0}},
			{At: 3_600_000_000, Cost: 1, Want: Want{true, 0, -1, 7_200_000, 0}},
			{At: 10_800_000_000, Cost: 2, Peek: true, Want: Want{true, 2, -1, 0, 0}},
		},
	},
	{
		// scale 1, refill 10/µs: one token per 100 ns, capacity 10
		Name:   "ten million per second, one token per 100ns",
		Policy: gcraP(10, 10_000_000, time.Second),
		Steps: []Step{
			{Cost: 10, Want: Want{true, 0, -1, 1, 0}},
			{At: 1, Cost: 10, Want: Want{true, 0, -1, 1, 0}},
			{At: 1, Cost: 1, Want: Want{false, 0, 1, 1, 0}},
			{At: 2, Cost: 11, Want: Want{false, 10, -1, 0, 0}},
			{At: 2, Cost: 3, Op: limit.OpClaim, Want: Want{true, 7, -1, 1, 3}},
		},
	},
	{
		// scale 1, refill 10/µs, capacity 20,000,000
		Name:   "ten million per second, burst of twenty million",
		Policy: gcraP(20_000_000, 10_000_000, time.Second),
		Steps: []Step{
			{Cost: 15_000_000, Want: Want{true, 5_000_000, -1, 1500, 0}},
			{At: 100, Cost: 5_001_001, Want: Want{false, 5_001_000, 1, 1500, 0}},
			{At: 100, Cost: 5_001_000, Want: Want{true, 0, -1, 2000, 0}},
		},
	},
	{
		// scale 86,400,000 (one token per 86.4 s), refill 1/µs
		Name:   "a thousand per day",
		Policy: gcraP(1000, 1000, 24*time.Hour),
		Steps: []Step{
			{Cost: 1000, Want: Want{true, 0, -1, 86_400_000, 0}},
			{At: 86_400 * ms, Cost: 1, Want: Want{true, 0, -1, 86_400_000, 0}},
			{At: 86_400 * ms, Cost: 1, Want: Want{false, 0, 86_400, 86_400_000, 0}},
			{At: 86_400*ms + 43_200_000_000, Cost: 501, Want: Want{false, 500, 86_400, 43_200_000, 0}},
		},
	},
	{
		// scale 100,000, refill 1/µs. Before the last write the debt is the
		// one of the write: nothing refilled backwards, nothing owed twice.
		Name:   "clock going backwards refills nothing and loses nothing",
		Policy: gcraP(10, 10, time.Second),
		Steps: []Step{
			{At: 1000 * ms, Cost: 10, Want: Want{true, 0, -1, 1000, 0}},
			{At: 500 * ms, Cost: 1, Want: Want{false, 0, 100, 1000, 0}},
			{At: 500 * ms, Cost: 2, Op: limit.OpReturn, Want: Want{true, 2, -1, 800, 0}},
			{At: 900 * ms, Cost: 2, Want: Want{true, 0, -1, 1000, 0}},
			{At: 1100 * ms, Cost: 1, Want: Want{true, 0, -1, 1000, 0}},
			{At: 1000 * ms, Cost: 1, Peek: true, Want: Want{false, 0, 100, 1000, 0}},
		},
	},
	{
		// The debt is kept in tokens: a change of rate converts its units
		// (rounding up), a smaller limit caps it, a larger one leaves it.
		Name:   "policy change of rate and limit keeps the tokens owed",
		Policy: gcraP(100, 50, time.Second), // scale 20,000, refill 1
		Steps: []Step{
			{Cost: 60, Want: Want{true, 40, -1, 1200, 0}}, // owes 60 tokens
			// scale 10,000: owes 600,000 units, 600 ms
			{Cost: 41, Policy: gcraP(100, 100, time.Second), Want: Want{false, 40, 10, 600, 0}},
			// capacity 500,000: the debt of 600,000 is kept (up to twice
			// the burst), nothing is left, and a token is 110 ms away
			{Cost: 1, Peek: true, Policy: gcraP(50, 100, time.Second), Want: Want{false, 0, 110, 600, 0}},
			// capacity 2,000,000: still owes 60 of 200
			{Cost: 140, Policy: gcraP(200, 100, time.Second), Want: Want{true, 0, -1, 2000, 0}},
			// scale 1,000, refill 1: owes 200 tokens = 200,000 units, 100 ms
			// pay 100 of them
			{At: 100 * ms, Cost: 1, Policy: gcraP(200, 1, time.Millisecond), Want: Want{true, 99, -1, 101, 0}},
		},
	},
	{
		// scale 1,000,000, refill 1/µs, capacity 5,000,000
		Name:   "cost 0 is admitted and spends nothing",
		Policy: gcraP(5, 1, time.Second),
		Steps: []Step{
			{Cost: 0, Want: Want{true, 5, -1, 0, 0}},
			{Cost: 5, Want: Want{true, 0, -1, 5000, 0}},
			{Cost: 0, Want: Want{true, 0, -1, 5000, 0}},
			{At: 500 * ms, Cost: 0, Want: Want{true, 0, -1, 4500, 0}},
			{At: 500 * ms, Cost: 1, Peek: true, Want: Want{false, 0, 500, 4500, 0}},
			{At: 500 * ms, Cost: 0, Op: limit.OpClaim, Want: Want{true, 0, -1, 4500, 0}},
			{At: 500 * ms, Cost: 0, Op: limit.OpReturn, Want: Want{true, 0, -1, 4500, 0}},
			{At: 1000 * ms, Cost: 1, Want: Want{true, 0, -1, 5000, 0}},
		},
	},
	{
		// 3,000,000 s of refill at 1 unit/µs pays any debt
		Name:   "long idle pays the debt, no credit beyond the limit",
		Policy: gcraP(5, 1, time.Second),
		Steps: []Step{
			{Cost: 5, Want: Want{true, 0, -1, 5000, 0}},
			{At: 3_000_000_000_000, Cost: 5, Want: Want{true, 0, -1, 5000, 0}},
			{At: 3_000_000_000_000, Cost: 1, Want: Want{false, 0, 1000, 5000, 0}},
		},
	},
}
