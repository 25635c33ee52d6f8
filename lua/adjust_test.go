package lua_test

import (
	"math/rand/v2"

	"github.com/sluice-rl/sluice/limit"
)

// randomOp draws an op of the five a script decides, OpAdjust included,
// for cost: an adjust's delta is cost or -cost, now and then a huge one.
func randomOp(rng *rand.Rand, cost int64) (limit.Op, int64) {
	op := limit.Op(rng.IntN(5))
	if op != limit.OpAdjust {
		return op, cost
	}
	if rng.IntN(20) == 0 {
		cost = 1<<62 + cost
	}
	if rng.IntN(2) == 0 {
		cost = -cost
	}
	return op, cost
}

// fuzzOp reads an op from b (of the five, OpAdjust included) and, for an
// adjust, the delta's sign from the low bit of sign (1: a give-back).
func fuzzOp(b, sign byte, cost int64) (limit.Op, int64) {
	op := limit.Op(b % 5)
	if op == limit.OpAdjust && sign&1 == 1 {
		cost = -cost
	}
	return op, cost
}
