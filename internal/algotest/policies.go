package algotest

import (
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// The policies of the tables, each named "v": limitN at rate per period,
// and one constructor per algorithm so that a table reads as its numbers.

func policyOf(alg limit.Algorithm, limitN, rate int64, period time.Duration) *limit.Policy {
	return &limit.Policy{Name: "v", Algorithm: alg, Limit: limitN, Rate: rate, Period: period}
}

func tb(limitN, rate int64, period time.Duration) *limit.Policy {
	return policyOf(limit.TokenBucket, limitN, rate, period)
}

func gcraP(limitN, rate int64, period time.Duration) *limit.Policy {
	return policyOf(limit.GCRA, limitN, rate, period)
}

// pl is the internal pool algorithm's (a region's share of a global budget).
func pl(limitN, rate int64, period time.Duration) *limit.Policy {
	return policyOf(limit.Pool, limitN, rate, period)
}

// sw and fw are the windows': limitN per period.
func sw(limitN int64, period time.Duration) *limit.Policy {
	return policyOf(limit.SlidingWindow, limitN, 1, period)
}

func fw(limitN int64, period time.Duration) *limit.Policy {
	return policyOf(limit.FixedWindow, limitN, 1, period)
}

// cc is a concurrency limit's: limitN slots, each held period by default.
func cc(limitN int64, period time.Duration) *limit.Policy {
	return policyOf(limit.Concurrency, limitN, 0, period)
}
