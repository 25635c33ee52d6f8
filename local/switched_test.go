package local

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/algotest"
	"github.com/sluice-rl/sluice/limit"
)

// A key whose policy changes to concurrency from any rate algorithm, the
// calendar included, and back: the table the Lua scripts run too.
func TestConcurrencySwitched(t *testing.T) {
	t.Parallel()
	clock := new(int64)
	s := New(Config{Now: func() time.Time { return time.UnixMicro(*clock) }})
	ctx := context.Background()
	algotest.RunSlots(t, algotest.Switched, "", algotest.Slots{
		Acquire: func(t *testing.T, key string, p *limit.Policy, token string, ttlMs, now int64) limit.Result {
			*clock = now
			return s.Acquire(ctx, key, p, token, ttlMs)
		},
		Release: func(t *testing.T, key string, p *limit.Policy, token string, now int64) bool {
			*clock = now
			held, err := s.Release(ctx, key, p, token)
			if err != nil {
				t.Fatal(err)
			}
			return held
		},
		Decide: func(t *testing.T, key string, p *limit.Policy, cost int64, op limit.Op, now int64) limit.Result {
			*clock = now
			var out [1]limit.Result
			s.Do(ctx, []limit.Request{{Key: key, Cost: cost, Op: op, Policy: p}}, out[:])
			return out[0]
		},
	})
}
