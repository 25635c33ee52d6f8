package lua_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/algotest"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/lua"
)

var (
	acquireAt = redis.NewScript(lua.Acquire.WithTestClock().Src)
	releaseAt = redis.NewScript(lua.Release.WithTestClock().Src)
)

// slotsOn runs the slot scripts on c at the vectors' clock.
func slotsOn(ctx context.Context, c *redis.Client) algotest.Slots {
	return algotest.Slots{
		Acquire: func(t *testing.T, key string, p *limit.Policy, token string, ttlMs, now int64) limit.Result {
			v, err := acquireAt.Run(ctx, c, []string{key}, p.Limit, ttlMs, token, now/1_000_000, now%1_000_000).Int64Slice()
			if err != nil {
				return limit.Result{Err: err}
			}
			if len(v) != lua.ReplyInts {
				return limit.Result{Err: fmt.Errorf("reply %v, want 7 integers", v)}
			}
			return result(v)
		},
		Release: func(t *testing.T, key string, p *limit.Policy, token string, now int64) bool {
			t.Helper()
			v, err := releaseAt.Run(ctx, c, []string{key}, token, now/1_000_000, now%1_000_000).Int64Slice()
			if err != nil || len(v) != lua.ReplyInts {
				t.Fatalf("release: %v %v", v, err)
			}
			return v[0] == 1
		},
		TTL: pttl(ctx, c),
	}
}

// The concurrency vectors on the Lua scripts in a real Redis.
func TestConcurrencyVectors(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	algotest.RunSlots(t, algotest.Concurrency, "cvec:", slotsOn(context.Background(), node.Client()))
}

// A key keeps one owner: the slot scripts never read a rate state as free
// slots (every slot reads as held until it expires), the rate scripts
// never read a set of slots as a fresh bucket (it reads as spent), and a
// value sluice did not write is an error, never an admission.
func TestConcurrencyOwner(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	c := node.Client()
	slots := slotsOn(ctx, c)
	cp := &limit.Policy{Algorithm: limit.Concurrency, Limit: 5, Period: 1000_000_000}
	tb := &limit.Policy{Algorithm: limit.TokenBucket, Limit: 10, Rate: 10, Period: 1000_000_000}
	now := algotest.T0

	// a bucket's state under a concurrency policy
	if r := evalAt(ctx, c, "rate", tb, 3, limit.OpTake, now); r.Err != nil || !r.Allowed {
		t.Fatalf("take: %+v", r)
	}
	r := slots.Acquire(t, "rate", cp, "a", 1000, now)
	if r.Err != nil || r.Allowed || r.Remaining != 0 || r.RetryAfterMs < 1 || r.RetryAfterMs > 2000 {
		t.Fatalf("acquire on a bucket's key: %+v, want refused until the bucket's state expires", r)
	}
	if slots.Release(t, "rate", cp, "a", now) {
		t.Fatal("release on a bucket's key held a slot")
	}
	if typ := c.Type(ctx, "rate").Val(); typ != "string" {
		t.Fatalf("the bucket's state became a %s", typ)
	}

	// slots under a bucket policy: spent, never full; a return credits nothing
	if r := slots.Acquire(t, "slots", cp, "a", 1000, now); !r.Allowed {
		t.Fatalf("acquire: %+v", r)
	}
	for _, op := range []limit.Op{limit.OpTake, limit.OpPeek, limit.OpReturn, limit.OpTake} {
		r := evalAt(ctx, c, "slots", tb, 1, op, now)
		if r.Err != nil || (op != limit.OpReturn && r.Allowed) {
			t.Fatalf("op %d on a concurrency key: %+v, want spent", op, r)
		}
	}
	if !slots.Release(t, "slots", cp, "a", now) {
		t.Fatal("the slot was lost to the bucket's reads")
	}

	// what sluice did not write
	c.ZAdd(ctx, "foreign", redis.Z{Score: 1, Member: "x"})
	c.Set(ctx, "str", "hello", 0)
	for _, k := range []string{"foreign", "str"} {
		if r := slots.Acquire(t, k, cp, "a", 1000, now); r.Err == nil {
			t.Fatalf("acquire on %s: %+v, want WRONGTYPE", k, r)
		}
	}
	if r := evalAt(ctx, c, "foreign", tb, 1, limit.OpTake, now); r.Err == nil {
		t.Fatalf("take on a foreign zset: %+v, want an error", r)
	}
}
