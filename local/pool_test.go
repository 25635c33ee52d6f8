package local

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/algotest"
	"github.com/sluice-rl/sluice/limit"
)

// A pool unused for its TTL is gone, as the key is in Redis: the store
// reads it as empty from then on, and not a µs before.
func TestStorePoolExpires(t *testing.T) {
	t.Parallel()
	p := &limit.Policy{Algorithm: limit.Pool, Limit: 10, Rate: 5, Period: time.Second} // TTL 10 s
	now := algotest.T0
	s := New(Config{Now: func() time.Time { return time.UnixMicro(now) }})
	ctx := context.Background()
	out := make([]limit.Result, 1)
	do := func(cost int64, op limit.Op) limit.Result {
		s.Do(ctx, []limit.Request{{Key: "pool", Cost: cost, Op: op, Policy: p}}, out)
		return out[0]
	}
	do(6, limit.OpReturn)
	now += 10_000_000 - 1
	if got := do(1, limit.OpTake); !got.Allowed || got.Remaining != 5 {
		t.Fatalf("a µs before the TTL: %+v, want 1 of 6 taken", got)
	}
	// the take renewed the TTL: 10 s from now
	now += 10_000_000
	if got := do(1, limit.OpPeek); got.Allowed || got.Remaining != 0 {
		t.Fatalf("10 s after the last write: %+v, want an empty pool", got)
	}
	if ok, _ := s.Reset(ctx, "pool", p); ok {
		t.Fatal("reset of an expired pool reported state")
	}
}

// A fill of any size never overflows: the pool holds its limit.
func TestPoolHugeReturn(t *testing.T) {
	t.Parallel()
	pp := limit.PoolParams{Limit: 10, TokenUs: 1, TTLMs: 10_000}
	st := PoolState{Tokens: 3, At: algotest.T0}
	res, changed := TakePool(&st, pp, math.MaxInt64, algotest.T0, limit.OpReturn)
	if !changed || res.Remaining != 10 || st.Tokens != 10 {
		t.Fatalf("return of MaxInt64: %+v state %+v, want a full pool of 10", res, st)
	}
}
