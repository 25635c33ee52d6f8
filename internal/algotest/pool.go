package algotest

import (
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// Pool is the table for the internal pool algorithm (a region's share of
// a global budget): an absent key is EMPTY, tokens come only from returns
// (the allocator's fills), time refills nothing. The comments give each
// policy's limit.PoolParams; retry is ceil(missing × TokenUs / 1000) ms,
// reset ceil((Limit − v) × TokenUs / 1000) ms. A TTL is checked only on a
// step that writes (a real Redis counts TTLs down in real time).
var Pool = []Vector{
	{
		// TokenUs 200,000, TTLMs 10,000 (the floor: a full refill is 2 s)
		Name:   "an absent key is an empty pool, and time refills nothing",
		Policy: pl(10, 5, time.Second),
		Steps: []Step{
			{Cost: 1, Want: Want{false, 0, 200, 2000, 0}, TTL: NoKey},
			{Cost: 1, Peek: true, Want: Want{false, 0, 200, 2000, 0}, TTL: NoKey},
			{Cost: 3, Op: limit.OpClaim, Want: Want{false, 0, 200, 2000, 0}, TTL: NoKey},
			{Cost: 1, Op: limit.OpReturn, Want: Want{true, 1, -1, 1800, 0}, TTL: 10_000},
			{At: 5000 * ms, Cost: 1, Peek: true, Want: Want{true, 1, -1, 1800, 0}},
			{At: 5000 * ms, Cost: 2, Want: Want{false, 1, 200, 1800, 0}},
		},
	},
	{
		Name:   "fill, spend, reject spends nothing, a pool at 0 is deleted",
		Policy: pl(10, 5, time.Second),
		Steps: []Step{
			{Cost: 4, Op: limit.OpReturn, Want: Want{true, 4, -1, 1200, 0}, TTL: 10_000},
			{Cost: 3, Want: Want{true, 1, -1, 1800, 0}, TTL: 10_000},
			{Cost: 2, Want: Want{false, 1, 200, 1800, 0}},
			{Cost: 1, Peek: true, Want: Want{true, 1, -1, 1800, 0}},
			{Cost: 1, Want: Want{true, 0, -1, 2000, 0}, TTL: NoKey},
			{Cost: 1, Want: Want{false, 0, 200, 2000, 0}, TTL: NoKey},
		},
	},
	{
		Name:   "fills stop at the limit; a fill of a full pool renews its TTL",
		Policy: pl(10, 5, time.Second),
		Steps: []Step{
			{Cost: 7, Op: limit.OpReturn, Want: Want{true, 7, -1, 600, 0}, TTL: 10_000},
			{Cost: 7, Op: limit.OpReturn, Want: Want{true, 10, -1, 0, 0}, TTL: 10_000},
			{Cost: 1 << 40, Op: limit.OpReturn, Want: Want{true, 10, -1, 0, 0}, TTL: 10_000},
			{At: 5000 * ms, Cost: 1, Op: limit.OpReturn, Want: Want{true, 10, -1, 0, 0}, TTL: 10_000},
			{At: 5000 * ms, Cost: 10, Want: Want{true, 0, -1, 2000, 0}, TTL: NoKey},
		},
	},
	{
		Name:   "cost above the limit can never succeed",
		Policy: pl(10, 5, time.Second),
		Steps: []Step{
			{Cost: 5, Op: limit.OpReturn, Want: Want{true, 5, -1, 1000, 0}},
			{Cost: 11, Want: Want{false, 5, -1, 1000, 0}},
			{Cost: 11, Peek: true, Want: Want{false, 5, -1, 1000, 0}},
			{Cost: 1 << 40, Want: Want{false, 5, -1, 1000, 0}},
			{Cost: 6, Want: Want{false, 5, 200, 1000, 0}},
			{Cost: 5, Want: Want{true, 0, -1, 2000, 0}, TTL: NoKey},
			{Cost: 11, Want: Want{false, 0, -1, 2000, 0}},
		},
	},
	{
		Name:   "a claim drains what there is, and when there is none retries as a take of 1",
		Policy: pl(10, 5, time.Second),
		Steps: []Step{
			{Cost: 6, Op: limit.OpReturn, Want: Want{true, 6, -1, 800, 0}},
			{Cost: 4, Op: limit.OpClaim, Want: Want{true, 2, -1, 1600, 4}, TTL: 10_000},
			{Cost: 5, Op: limit.OpClaim, Want: Want{true, 0, -1, 2000, 2}, TTL: NoKey},
			{Cost: 1, Op: limit.OpClaim, Want: Want{false, 0, 200, 2000, 0}},
			{Cost: 11, Op: limit.OpClaim, Want: Want{false, 0, 200, 2000, 0}},
			{Cost: 3, Op: limit.OpReturn, Want: Want{true, 3, -1, 1400, 0}},
			{Cost: 20, Op: limit.OpClaim, Want: Want{true, 0, -1, 2000, 3}, TTL: NoKey},
		},
	},
	{
		Name:   "a cost of 0 is allowed and changes nothing",
		Policy: pl(10, 5, time.Second),
		Steps: []Step{
			{Cost: 0, Want: Want{true, 0, -1, 2000, 0}, TTL: NoKey},
			{Cost: 0, Op: limit.OpClaim, Want: Want{true, 0, -1, 2000, 0}, TTL: NoKey},
			{Cost: 0, Op: limit.OpReturn, Want: Want{true, 0, -1, 2000, 0}, TTL: NoKey},
			{Cost: 3, Op: limit.OpReturn, Want: Want{true, 3, -1, 1400, 0}},
			{Cost: 0, Want: Want{true, 3, -1, 1400, 0}},
			{Cost: 0, Op: limit.OpClaim, Want: Want{true, 3, -1, 1400, 0}},
		},
	},
	{
		// TokenUs ceil(1,000,000 / 7) = 142,858
		Name:   "seven per second: retry and reset round up",
		Policy: pl(3, 7, time.Second),
		Steps: []Step{
			{Cost: 1, Op: limit.OpReturn, Want: Want{true, 1, -1, 286, 0}, TTL: 10_000},
			{Cost: 2, Want: Want{false, 1, 143, 286, 0}},
			{Cost: 3, Want: Want{false, 1, 286, 286, 0}},
			{Cost: 1, Want: Want{true, 0, -1, 429, 0}, TTL: NoKey},
		},
	},
	{
		// TokenUs 1 (a tenth of a µs, rounded up): retry never below 1 ms
		Name:   "ten million per second: a µs per token",
		Policy: pl(10, 10_000_000, time.Second),
		Steps: []Step{
			{Cost: 1, Want: Want{false, 0, 1, 1, 0}},
			{Cost: 10, Op: limit.OpReturn, Want: Want{true, 10, -1, 0, 0}, TTL: 10_000},
			{Cost: 11, Want: Want{false, 10, -1, 0, 0}},
			{Cost: 4, Want: Want{true, 6, -1, 1, 0}},
		},
	},
	{
		// TokenUs 86,400,000; TTLMs 86,400,000 + 1000: a day to refill at home
		Name:   "a thousand per day: the TTL is the time to refill at home",
		Policy: pl(1000, 1000, 24*time.Hour),
		Steps: []Step{
			{Cost: 1000, Op: limit.OpReturn, Want: Want{true, 1000, -1, 0, 0}, TTL: 86_401_000},
			{Cost: 1, Want: Want{true, 999, -1, 86_400, 0}, TTL: 86_401_000},
			{Cost: 1000, Want: Want{false, 999, 86_400, 86_400, 0}},
		},
	},
	{
		// TokenUs 3,600,000,000; TTLMs 7,200,000 + 1000
		Name:   "one per hour",
		Policy: pl(2, 1, time.Hour),
		Steps: []Step{
			{Cost: 1, Want: Want{false, 0, 3_600_000, 7_200_000, 0}},
			{Cost: 1, Op: limit.OpReturn, Want: Want{true, 1, -1, 3_600_000, 0}, TTL: 7_201_000},
			{Cost: 2, Want: Want{false, 1, 3_600_000, 3_600_000, 0}},
		},
	},
	{
		Name:   "a lower limit caps what the pool holds, a new rate only the times",
		Policy: pl(10, 5, time.Second),
		Steps: []Step{
			{Cost: 10, Op: limit.OpReturn, Want: Want{true, 10, -1, 0, 0}},
			{Cost: 1, Peek: true, Policy: pl(4, 5, time.Second), Want: Want{true, 4, -1, 0, 0}},
			{Cost: 1, Want: Want{true, 3, -1, 200, 0}},
			{Cost: 1, Peek: true, Policy: pl(10, 5, time.Second), Want: Want{true, 3, -1, 1400, 0}},
			// TokenUs 1,000,000
			{Cost: 5, Policy: pl(10, 1, time.Second), Want: Want{false, 3, 2000, 7000, 0}},
		},
	},
	{
		// One owner per stored state: a state another algorithm wrote is
		// never read as full. A pool starts empty anyway; to a bucket or a
		// window a pool is spent (refused until the pool's TTL ends).
		Name:   "another algorithm's state is an empty pool, and a pool is spent to it",
		Policy: tb(5, 1, time.Second),
		Steps: []Step{
			{Cost: 1, Want: Want{true, 4, -1, 1000, 0}},
			{Cost: 1, Policy: pl(10, 5, time.Second), Want: Want{false, 0, 200, 2000, 0}},
			{Cost: 2, Op: limit.OpReturn, Want: Want{true, 2, -1, 1600, 0}, TTL: 10_000},
			{Cost: 1, Policy: tb(5, 1, time.Second), Want: Want{false, 0, 1000, 5000, 0}},
			{Cost: 1, Peek: true, Policy: pl(10, 5, time.Second), Want: Want{true, 2, -1, 1600, 0}},
			{Cost: 1, Policy: fw(3, time.Second), Want: Want{false, 0, 1000, 1000, 0}},
			{Cost: 1, Op: limit.OpClaim, Policy: pl(10, 5, time.Second), Want: Want{true, 1, -1, 1800, 1}},
		},
	},
	{
		// A return to a state another algorithm wrote is not stored: its
		// tokens came from a state that is gone. Before, a window's return
		// to a spent bucket lowered the count to 0 and deleted the key,
		// and the bucket read as full again (FuzzBatchAgreesWithGo: 14
		// admitted at one instant against a limit of 7).
		Name:   "a return to another algorithm's state gives nothing back",
		Policy: tb(7, 1, time.Second),
		Steps: []Step{
			{Cost: 7, Want: Want{true, 0, -1, 7000, 0}},
			// the reply reads the state as it stays: spent (it said 4 left
			// before RL.ADJUST, which sends such returns from clients)
			{Cost: 5, Op: limit.OpReturn, Policy: fw(4, time.Second), Want: Want{true, 0, -1, 1000, 0}},
			{Cost: 7, Policy: tb(7, 1, time.Second), Want: Want{false, 0, 7000, 7000, 0}},
		},
	},
	{
		// The same the other way: a bucket's return does not replace the
		// window's state (which the window would then read as spent).
		Name:   "a return to another algorithm's state leaves that state alone",
		Policy: fw(3, time.Second),
		Steps: []Step{
			{Cost: 1, Want: Want{true, 2, -1, 1000, 0}},
			{Cost: 2, Op: limit.OpReturn, Policy: tb(5, 1, time.Second), Want: Want{true, 0, -1, 5000, 0}},
			{Cost: 1, Policy: fw(3, time.Second), Want: Want{true, 1, -1, 1000, 0}},
		},
	},
}
