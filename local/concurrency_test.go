package local

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/algotest"
	"github.com/sluice-rl/sluice/limit"
)

// storeAt is a Store whose clock the caller sets.
func storeAt() (*Store, *int64) {
	now := new(int64)
	return New(Config{Now: func() time.Time { return time.UnixMicro(*now) }}), now
}

// The concurrency vectors on the Go Store (embedded mode and the local
// fallback), the same table as the Lua scripts run.
func TestConcurrencyVectors(t *testing.T) {
	t.Parallel()
	s, clock := storeAt()
	ctx := context.Background()
	algotest.RunSlots(t, algotest.Concurrency, "", algotest.Slots{
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
	})
}

// One owner per key: a bucket holds no slot (an acquire replaces it), and
// slots read as a spent bucket.
func TestConcurrencyOwner(t *testing.T) {
	t.Parallel()
	s, clock := storeAt()
	*clock = algotest.T0
	ctx := context.Background()
	cp := &limit.Policy{Algorithm: limit.Concurrency, Limit: 2, Period: time.Second}
	tb := &limit.Policy{Algorithm: limit.TokenBucket, Limit: 10, Rate: 10, Period: time.Second}
	var out [1]limit.Result
	s.Do(ctx, []limit.Request{{Key: "rate", Cost: 1, Policy: tb}}, out[:])
	if r := s.Acquire(ctx, "rate", cp, "a", 1000); !r.Allowed || r.Remaining != 1 {
		t.Fatalf("acquire on a bucket's key: %+v, want it read as no slot held (TestConcurrencySwitched)", r)
	}
	if r := s.Acquire(ctx, "slots", cp, "a", 1000); !r.Allowed {
		t.Fatalf("acquire: %+v", r)
	}
	s.Do(ctx, []limit.Request{{Key: "slots", Cost: 1, Policy: tb}}, out[:])
	if out[0].Err != nil || out[0].Allowed {
		t.Fatalf("take on a concurrency key: %+v, want spent", out[0])
	}
	if held, _ := s.Release(ctx, "slots", cp, "a"); !held {
		t.Fatal("the slot was lost")
	}
	if ok, _ := s.Reset(ctx, "slots", cp); ok {
		t.Fatal("reset found slots after the last release")
	}
	s.Acquire(ctx, "slots", cp, "b", 1000)
	if ok, _ := s.Reset(ctx, "slots", cp); !ok {
		t.Fatal("reset did not find the held slot")
	}
	if r := s.Acquire(ctx, "slots", cp, "c", 1000); r.Remaining != 1 {
		t.Fatalf("after reset: %+v, want one slot free of two", r)
	}
}

// Hold keeps slots past the limit, up to HoldCap, and Held counts them.
func TestHoldCap(t *testing.T) {
	t.Parallel()
	s, clock := storeAt()
	*clock = algotest.T0
	p := &limit.Policy{Algorithm: limit.Concurrency, Limit: 2, Period: time.Second}
	for i := range 100 {
		s.Hold("k", p, itoa(i), 1000)
	}
	held, next, last := s.Held("k", p)
	if held != HoldCap(p) || held != 64 || next != 1000 || last != 1000 {
		t.Fatalf("Held %d next %d last %d, want 64 slots of 1 s", held, next, last)
	}
	*clock += 1000 * 1000
	if held, _, _ := s.Held("k", p); held != 0 {
		t.Fatalf("after their TTL %d held", held)
	}
}
