package algotest

import (
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// The RL.ADJUST vectors (limit.OpAdjust, Cost the signed delta), one set
// per algorithm, appended to its table: a positive delta spends without a
// check (a bucket into debt, at most one limit deep; a window up to its
// limit), a negative one gives back to the state in force now, never above
// the limit, nothing to a window that has closed and nothing to a state
// another algorithm wrote.
func init() {
	TokenBucket = append(TokenBucket, adjustBucket("token_bucket", tb)...)
	GCRA = append(GCRA, adjustBucket("gcra", gcraP)...)
	FixedWindow = append(FixedWindow, adjustFixed...)
	SlidingWindow = append(SlidingWindow, adjustSliding...)
}

// adjustBucket is the same vectors for both bucket algorithms (their
// replies agree to the unit), on a policy of 10 per second: a token is
// 100 ms of refill.
func adjustBucket(name string, pol func(int64, int64, time.Duration) *limit.Policy) []Vector {
	p := func() *limit.Policy { return pol(10, 10, time.Second) }
	return []Vector{
		{
			Name:   name + " adjust up leaves a debt that refill repays before anything is admitted",
			Policy: p(),
			Steps: []Step{
				{Cost: 10, Want: Want{true, 0, -1, 1000, 0}, TTL: 2000},
				{Cost: 5, Op: limit.OpAdjust, Want: Want{true, 0, -1, 1500, 0}, TTL: 2500},
				{Cost: 1, Want: Want{false, 0, 600, 1500, 0}},
				{At: 500 * ms, Cost: 1, Want: Want{false, 0, 100, 1000, 0}},
				{At: 600*ms - 1, Cost: 1, Want: Want{false, 0, 1, 901, 0}},
				{At: 600 * ms, Cost: 1, Want: Want{true, 0, -1, 1000, 0}},
				{At: 600 * ms, Cost: 1, Peek: true, Want: Want{false, 0, 100, 1000, 0}},
			},
		},
		{
			Name:   name + " a debt is at most one limit deep",
			Policy: p(),
			Steps: []Step{
				{Cost: 25, Op: limit.OpAdjust, Want: Want{true, 0, -1, 2000, 0}, TTL: 3000},
				{Cost: 1, Want: Want{false, 0, 1100, 2000, 0}},
				{Cost: 1 << 62, Op: limit.OpAdjust, Want: Want{true, 0, -1, 2000, 0}, TTL: 3000},
				{At: 1000 * ms, Cost: 1, Want: Want{false, 0, 100, 1000, 0}},
				{At: 2000 * ms, Cost: 10, Want: Want{true, 0, -1, 1000, 0}},
			},
		},
		{
			Name:   name + " adjust down gives back, never above the limit",
			Policy: p(),
			Steps: []Step{
				{Cost: 4, Want: Want{true, 6, -1, 400, 0}},
				{Cost: -3, Op: limit.OpAdjust, Want: Want{true, 9, -1, 100, 0}, TTL: 1100},
				{Cost: -5, Op: limit.OpAdjust, Want: Want{true, 10, -1, 0, 0}, TTL: NoKey},
				{Cost: 10, Want: Want{true, 0, -1, 1000, 0}},
				{Cost: -(1 << 62), Op: limit.OpAdjust, Want: Want{true, 10, -1, 0, 0}, TTL: NoKey},
				{Cost: 11, Want: Want{false, 10, -1, 0, 0}},
			},
		},
		{
			Name:   name + " adjust down pays a debt first",
			Policy: p(),
			Steps: []Step{
				{Cost: 10, Want: Want{true, 0, -1, 1000, 0}},
				{Cost: 3, Op: limit.OpAdjust, Want: Want{true, 0, -1, 1300, 0}},
				{Cost: -5, Op: limit.OpAdjust, Want: Want{true, 2, -1, 800, 0}},
				{Cost: 3, Want: Want{false, 2, 100, 800, 0}},
				{Cost: 2, Want: Want{true, 0, -1, 1000, 0}},
				{Cost: 4, Op: limit.OpAdjust, Want: Want{true, 0, -1, 1400, 0}},
				// a give-back of the limit or more does not forget the debt
				{Cost: -10, Op: limit.OpAdjust, Want: Want{true, 6, -1, 400, 0}},
				{Cost: 10, Op: limit.OpAdjust, Want: Want{true, 0, -1, 1400, 0}},
				{Cost: -14, Op: limit.OpAdjust, Want: Want{true, 10, -1, 0, 0}, TTL: NoKey},
				{Cost: 25, Op: limit.OpAdjust, Want: Want{true, 0, -1, 2000, 0}},
				{Cost: -11, Op: limit.OpAdjust, Want: Want{true, 1, -1, 900, 0}},
			},
		},
		{
			Name:   name + " a give-back to another algorithm's state gives nothing, a spend is kept",
			Policy: fw(10, time.Second),
			Steps: []Step{
				{Cost: 3, Want: Want{true, 7, -1, 1000, 0}},
				{Cost: -5, Op: limit.OpAdjust, Policy: p(), Want: Want{true, 0, -1, 1000, 0}, TTL: 2000},
				{Cost: 1, Want: Want{false, 0, 100, 1000, 0}},
				{Cost: 2, Op: limit.OpAdjust, Want: Want{true, 0, -1, 1200, 0}, TTL: 2200},
				{At: 200 * ms, Cost: 1, Want: Want{false, 0, 100, 1000, 0}},
				{At: 1000 * ms, Cost: 1, Want: Want{true, 7, -1, 300, 0}},
			},
		},
	}
}

// adjustFixed is for fixed_window, 10 per second: windows start on whole
// seconds of T0.
var adjustFixed = []Vector{
	{
		Name:   "adjust up fills the window at most; nothing more until it ends",
		Policy: fw(10, time.Second),
		Steps: []Step{
			{Cost: 4, Want: Want{true, 6, -1, 1000, 0}},
			{Cost: 3, Op: limit.OpAdjust, Want: Want{true, 3, -1, 1000, 0}, TTL: 2000},
			{Cost: 100, Op: limit.OpAdjust, Want: Want{true, 0, -1, 1000, 0}, TTL: 2000},
			{Cost: 1, Want: Want{false, 0, 1000, 1000, 0}},
			{Cost: -4, Op: limit.OpAdjust, Want: Want{true, 4, -1, 1000, 0}},
			{At: 1000 * ms, Cost: 10, Want: Want{true, 0, -1, 1000, 0}},
		},
	},
	{
		Name:   "adjust down gives back to the current window, never below its count",
		Policy: fw(10, time.Second),
		Steps: []Step{
			{Cost: 6, Want: Want{true, 4, -1, 1000, 0}},
			{Cost: -2, Op: limit.OpAdjust, Want: Want{true, 6, -1, 1000, 0}},
			{Cost: -100, Op: limit.OpAdjust, Want: Want{true, 10, -1, 0, 0}, TTL: NoKey},
		},
	},
	{
		Name:   "a give-back after the window closed credits nothing",
		Policy: fw(10, time.Second),
		Steps: []Step{
			{At: 900 * ms, Cost: 10, Want: Want{true, 0, -1, 100, 0}},
			{At: 1000 * ms, Cost: -5, Op: limit.OpAdjust, Want: Want{true, 10, -1, 0, 0}, TTL: NoKey},
			{At: 1000 * ms, Cost: 3, Want: Want{true, 7, -1, 1000, 0}},
			{At: 1000 * ms, Cost: -5, Op: limit.OpAdjust, Want: Want{true, 10, -1, 0, 0}, TTL: NoKey},
			{At: 1000 * ms, Cost: 10, Want: Want{true, 0, -1, 1000, 0}},
			{At: 1000 * ms, Cost: 1, Want: Want{false, 0, 1000, 1000, 0}},
		},
	},
	{
		Name:   "a give-back to another algorithm's state gives nothing, a spend is kept",
		Policy: tb(10, 10, time.Second),
		Steps: []Step{
			{Cost: 1, Want: Want{true, 9, -1, 100, 0}},
			{Cost: -5, Op: limit.OpAdjust, Policy: fw(10, time.Second), Want: Want{true, 0, -1, 1000, 0}, TTL: 1100},
			{Cost: 1, Peek: true, Want: Want{false, 0, 1000, 1000, 0}},
			{Cost: 2, Op: limit.OpAdjust, Want: Want{true, 0, -1, 1000, 0}, TTL: 2000},
			{Cost: 1, Policy: tb(10, 10, time.Second), Want: Want{false, 0, 100, 1000, 0}},
		},
	},
}

// adjustSliding is for sliding_window, 10 per second (a tick of 1 µs).
var adjustSliding = []Vector{
	{
		Name:   "adjust up fills the current window; the estimate decays in the next",
		Policy: sw(10, time.Second),
		Steps: []Step{
			{Cost: 4, Want: Want{true, 6, -1, 2000, 0}},
			{Cost: 100, Op: limit.OpAdjust, Want: Want{true, 0, -1, 2000, 0}, TTL: 3000},
			{Cost: 1, Want: Want{false, 0, 1100, 2000, 0}},
			{At: 1100 * ms, Cost: 1, Want: Want{true, 0, -1, 1900, 0}},
		},
	},
	{
		Name:   "a give-back in the next window lowers only its own count",
		Policy: sw(10, time.Second),
		Steps: []Step{
			{At: 900 * ms, Cost: 10, Want: Want{true, 0, -1, 1100, 0}},
			{At: 1000 * ms, Cost: -5, Op: limit.OpAdjust, Want: Want{true, 0, -1, 1000, 0}, TTL: 2000},
			{At: 1000 * ms, Cost: 1, Peek: true, Want: Want{false, 0, 100, 1000, 0}},
			{At: 1500 * ms, Cost: 5, Want: Want{true, 0, -1, 1500, 0}},
			{At: 1500 * ms, Cost: -3, Op: limit.OpAdjust, Want: Want{true, 3, -1, 1500, 0}},
			{At: 1500 * ms, Cost: -9, Op: limit.OpAdjust, Want: Want{true, 5, -1, 500, 0}},
		},
	},
}
