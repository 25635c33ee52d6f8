package algotest

import (
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// T0 is the clock at the start of every vector, in µs since the epoch.
const T0 int64 = 1_700_000_000_000_000

// Step is one call at T0 + At µs, and the reply it must get.
type Step struct {
	At   int64 // µs after T0; steps may go backwards to model clock skew
	Cost int64
	Peek bool
	Op   limit.Op // OpClaim or OpReturn; zero with Peek false is OpTake
	// Policy, when set, replaces the vector's policy from this step on.
	Policy *limit.Policy
	Want   Want
	// TTL, when not 0, is the key's TTL in ms after the step (NoKey: the
	// key does not exist), checked by the runners that can read TTLs
	// (RunTTL).
	TTL int64
	// Sluice, when not 0, is how far sluice's clock is ahead of the
	// store's at this step, µs (negative: behind): a calendar window's
	// bounds come from sluice's clock, its decision from the store's. Only
	// RunAt runs such steps.
	Sluice int64
}

// NoKey is Step.TTL for a key that must not exist after the step.
const NoKey = -2

// Want is the five numeric fields of the reply.
type Want struct {
	Allowed    bool
	Remaining  int64
	RetryAfter int64 // ms
	ResetAfter int64 // ms
	Granted    int64 // OpClaim only
}

// Vector is a named sequence of steps on one fresh key.
type Vector struct {
	Name   string
	Policy *limit.Policy
	Steps  []Step
}

const ms = 1000 // µs

// costAboveLimit is the vector every algorithm with a limit passes: a
// cost above p's limit is refused on a fresh key and after the whole
// limit is taken, with nothing spent, however large; the limit itself
// fits, and leaves the key resetAfter ms from full.
func costAboveLimit(p *limit.Policy, resetAfter int64) Vector {
	n := p.Limit
	return Vector{
		Name:   "cost above limit can never succeed",
		Policy: p,
		Steps: []Step{
			{Cost: n + 1, Want: Want{false, n, -1, 0, 0}},
			{Cost: 1 << 40, Want: Want{false, n, -1, 0, 0}},
			{Cost: n, Want: Want{true, 0, -1, resetAfter, 0}},
			{Cost: n + 1, Want: Want{false, 0, -1, resetAfter, 0}},
		},
	}
}

// TokenBucket is the table for token_bucket.
var TokenBucket = []Vector{
	{
		Name:   "fresh key starts full",
		Policy: tb(100, 50, time.Second),
		Steps: []Step{
			{Cost: 1, Want: Want{true, 99, -1, 20, 0}},
		},
	},
	{
		Name:   "drain, reject spends nothing, refill",
		Policy: tb(100, 50, time.Second),
		Steps: []Step{
			{Cost: 100, Want: Want{true, 0, -1, 2000, 0}},
			{Cost: 1, Want: Want{false, 0, 20, 2000, 0}},
			{At: 10 * ms, Cost: 1, Want: Want{false, 0, 10, 1990, 0}},
			{At: 10 * ms, Cost: 1, Want: Want{false, 0, 10, 1990, 0}},
			{At: 20 * ms, Cost: 1, Want: Want{true, 0, -1, 2000, 0}},
			{At: 20*ms + 1, Cost: 1, Want: Want{false, 0, 20, 2000, 0}},
			{At: 60 * ms, Cost: 2, Want: Want{true, 0, -1, 2000, 0}},
		},
	},
	costAboveLimit(tb(100, 50, time.Second), 2000),
	{
		Name:   "peek spends nothing",
		Policy: tb(10, 10, time.Second),
		Steps: []Step{
			{Cost: 4, Peek: true, Want: Want{true, 10, -1, 0, 0}},
			{Cost: 4, Want: Want{true, 6, -1, 400, 0}},
			{Cost: 7, Peek: true, Want: Want{false, 6, 100, 400, 0}},
			{Cost: 6, Peek: true, Want: Want{true, 6, -1, 400, 0}},
			{Cost: 6, Want: Want{true, 0, -1, 1000, 0}},
		},
	},
	{
		Name:   "one per hour",
		Policy: tb(1, 1, time.Hour),
		Steps: []Step{
			{Cost: 1, Want: Want{true, 0, -1, 3_600_000, 0}},
			{At: 1000 * ms, Cost: 1, Want: Want{false, 0, 3_599_000, 3_599_000, 0}},
			{At: 3_599_999_999, Cost: 1, Want: Want{false, 0, 1, 1, 0}},
			{At: 3_600_000_000, Cost: 1, Want: Want{true, 0, -1, 3_600_000, 0}},
		},
	},
	{
		Name:   "three per hour rounds retry up",
		Policy: tb(3, 3, time.Hour),
		Steps: []Step{
			{Cost: 3, Want: Want{true, 0, -1, 3_600_000, 0}},
			{At: 1, Cost: 1, Want: Want{false, 0, 1_200_000, 3_600_000, 0}},
			{At: 1_200_000_000, Cost: 1, Want: Want{true, 0, -1, 3_600_000, 0}},
		},
	},
	{
		Name:   "two million per second",
		Policy: tb(2_000_000, 2_000_000, time.Second),
		Steps: []Step{
			{Cost: 1_000_000, Want: Want{true, 1_000_000, -1, 500, 0}},
			{At: 100, Cost: 1_000_201, Want: Want{false, 1_000_200, 1, 500, 0}},
			{At: 100, Cost: 1_000_200, Want: Want{true, 0, -1, 1000, 0}},
			{At: 101, Cost: 2, Want: Want{true, 0, -1, 1000, 0}},
			{At: 101, Cost: 1, Want: Want{false, 0, 1, 1000, 0}},
		},
	},
	{
		Name:   "ten million per second, one token per 100ns",
		Policy: tb(10, 10_000_000, time.Second),
		Steps: []Step{
			{Cost: 10, Want: Want{true, 0, -1, 1, 0}},
			{At: 1, Cost: 10, Want: Want{true, 0, -1, 1, 0}},
			{At: 1, Cost: 1, Want: Want{false, 0, 1, 1, 0}},
			{At: 2, Cost: 11, Want: Want{false, 10, -1, 0, 0}},
		},
	},
	{
		Name:   "a day period",
		Policy: tb(1000, 1000, 24*time.Hour),
		Steps: []Step{
			{Cost: 1000, Want: Want{true, 0, -1, 86_400_000, 0}},
			{At: 86_400 * ms, Cost: 1, Want: Want{true, 0, -1, 86_400_000, 0}},
			{At: 86_400 * ms, Cost: 1, Want: Want{false, 0, 86_400, 86_400_000, 0}},
		},
	},
	{
		Name:   "clock going backwards refills nothing and loses nothing",
		Policy: tb(10, 10, time.Second),
		Steps: []Step{
			{At: 1000 * ms, Cost: 10, Want: Want{true, 0, -1, 1000, 0}},
			{At: 500 * ms, Cost: 1, Want: Want{false, 0, 100, 1000, 0}},
			{At: 1100 * ms, Cost: 1, Want: Want{true, 0, -1, 1000, 0}},
		},
	},
	{
		Name:   "policy change converts the stored units",
		Policy: tb(100, 50, time.Second),
		Steps: []Step{
			{Cost: 60, Want: Want{true, 40, -1, 1200, 0}},
			{Cost: 41, Policy: tb(100, 100, time.Second), Want: Want{false, 40, 10, 600, 0}},
			{Cost: 40, Policy: tb(20, 100, time.Second), Want: Want{false, 20, -1, 0, 0}},
			{Cost: 20, Policy: tb(20, 100, time.Second), Want: Want{true, 0, -1, 200, 0}},
		},
	},
	{
		Name:   "long idle refills to the limit, not beyond",
		Policy: tb(5, 1, time.Second),
		Steps: []Step{
			{Cost: 5, Want: Want{true, 0, -1, 5000, 0}},
			{At: 3_000_000_000_000, Cost: 5, Want: Want{true, 0, -1, 5000, 0}},
		},
	},
	{
		Name:   "claims grant what exists, returns give it back",
		Policy: tb(10, 10, time.Second),
		Steps: []Step{
			{Cost: 4, Op: limit.OpClaim, Want: Want{true, 6, -1, 400, 4}},
			{Cost: 8, Op: limit.OpClaim, Want: Want{true, 0, -1, 1000, 6}},
			{Cost: 1, Op: limit.OpClaim, Want: Want{false, 0, 100, 1000, 0}},
			{At: 50 * ms, Cost: 1, Op: limit.OpClaim, Want: Want{false, 0, 50, 950, 0}},
			{At: 50 * ms, Cost: 3, Op: limit.OpReturn, Want: Want{true, 3, -1, 650, 0}},
			{At: 50 * ms, Cost: 1, Want: Want{true, 2, -1, 750, 0}},
			{At: 50 * ms, Cost: 100, Op: limit.OpReturn, Want: Want{true, 10, -1, 0, 0}},
			{At: 50 * ms, Cost: 10, Want: Want{true, 0, -1, 1000, 0}},
		},
	},
	{
		Name:   "a return never fills past the limit",
		Policy: tb(5, 1, time.Second),
		Steps: []Step{
			{Cost: 2, Want: Want{true, 3, -1, 2000, 0}},
			{Cost: 4, Op: limit.OpReturn, Want: Want{true, 5, -1, 0, 0}},
			{Cost: 5, Op: limit.OpClaim, Want: Want{true, 0, -1, 5000, 5}},
		},
	},
}

// Table is one algorithm's vectors.
type Table struct {
	Algorithm limit.Algorithm
	Vectors   []Vector
}

// Tables is every algorithm's table, the internal pool's too: each runs
// against the Go code in local/ and against the Lua script in a real Redis.
func Tables() []Table {
	return []Table{
		{limit.TokenBucket, TokenBucket},
		{limit.GCRA, GCRA},
		{limit.SlidingWindow, SlidingWindow},
		{limit.FixedWindow, FixedWindow},
		{limit.Pool, Pool},
		{"calendar", Calendar}, // fixed_window with a calendar
	}
}

// Count returns the number of vectors and of steps in tables.
func Count(tables []Table) (vectors, steps int) {
	for _, t := range tables {
		vectors += len(t.Vectors)
		for _, v := range t.Vectors {
			steps += len(v.Steps)
		}
	}
	return vectors, steps
}
