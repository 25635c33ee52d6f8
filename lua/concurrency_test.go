package lua_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/algotest"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
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
		Decide: func(t *testing.T, key string, p *limit.Policy, cost int64, op limit.Op, now int64) limit.Result {
			return evalAt(ctx, c, key, p, cost, op, now)
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

// A key whose policy changes to concurrency from any rate algorithm, the
// calendar included, and back: the one table the Go store runs too.
func TestConcurrencySwitched(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	algotest.RunSlots(t, algotest.Switched, "cswitch:", slotsOn(context.Background(), node.Client()))
}

// A key keeps one owner: the slot scripts read a state another algorithm
// wrote (every tag of state.lua, and a hash of an earlier sluice) as no
// slot held and replace it, the rate scripts never read a set of slots as
// a fresh bucket (it reads as spent), and a value sluice did not write is
// an error, never an admission.
func TestConcurrencyOwner(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	c := node.Client()
	slots := slotsOn(ctx, c)
	cp := &limit.Policy{Algorithm: limit.Concurrency, Limit: 5, Period: 1000_000_000}
	tb := &limit.Policy{Algorithm: limit.TokenBucket, Limit: 10, Rate: 10, Period: 1000_000_000}
	now := algotest.T0

	// other owners' states, as written (the vectors of algotest.Switched
	// make them through the scripts): a release leaves each alone, an
	// acquire replaces it
	state := func(tag string) string { return tag + strings.Repeat("\x00", 24) }
	for _, tag := range []string{"b", "g", "w", "p", "c"} {
		c.Set(ctx, "tag:"+tag, state(tag), time.Hour)
	}
	c.HSet(ctx, "tag:hash", "v", 1, "t", 2, "s", 3)
	c.Expire(ctx, "tag:hash", time.Hour)
	for _, k := range []string{"tag:b", "tag:g", "tag:w", "tag:p", "tag:c", "tag:hash"} {
		typ := c.Type(ctx, k).Val()
		if slots.Release(t, k, cp, "a", now) || c.Type(ctx, k).Val() != typ {
			t.Fatalf("release on %s changed it", k)
		}
		r := slots.Acquire(t, k, cp, "a", 1000, now)
		if r.Err != nil || !r.Allowed || r.Remaining != 4 || r.ResetAfterMs != 1000 {
			t.Fatalf("acquire on %s: %+v, want one slot of 5 held", k, r)
		}
		if typ := c.Type(ctx, k).Val(); typ != "zset" {
			t.Fatalf("%s is a %s after the acquire, want the set of slots", k, typ)
		}
		if !slots.Release(t, k, cp, "a", now) {
			t.Fatalf("the slot on %s was not held", k)
		}
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
	c.Set(ctx, "str25", "x"+strings.Repeat("\x00", 24), 0)
	for _, k := range []string{"foreign", "str", "str25"} {
		if r := slots.Acquire(t, k, cp, "a", 1000, now); r.Err == nil {
			t.Fatalf("acquire on %s: %+v, want WRONGTYPE", k, r)
		}
	}
	if r := evalAt(ctx, c, "foreign", tb, 1, limit.OpTake, now); r.Err == nil {
		t.Fatalf("take on a foreign zset: %+v, want an error", r)
	}
}

// FuzzConcurrencyAgreesWithGo drives the slot scripts on a real Redis and
// local's AcquireSlot and ReleaseSlot through the same random sequence:
// the first byte is the limit (1–8); then 4 bytes a step: acquire or
// release, one of 4 tokens, a TTL, and a clock step that may go back.
func FuzzConcurrencyAgreesWithGo(f *testing.F) {
	node := redistest.NewSingle(f)
	f.Add([]byte("\x02" + "\x00\x00\x00\x10" + "\x01\x00\x01\x10" + "\x02\x01\x02\x10" + "\x04\x00\x00\x80"))
	f.Add([]byte("\x01" + "\x00\x03\x01\x00" + "\x01\x03\x00\xf0" + "\x00\x02\x03\x7f"))
	ttls := []int64{1, 7, 100, 1000, 86_400_000}
	var seq int
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 {
			return
		}
		p := &limit.Policy{Algorithm: limit.Concurrency, Limit: 1 + int64(data[0]%8), Period: time.Second}
		seq++
		key := "cfuzz:" + strconv.Itoa(seq)
		ctx := context.Background()
		slots := slotsOn(ctx, node.Client())
		var st local.SlotState
		now := algotest.T0
		steps := data[1:]
		if len(steps) > 64*4 {
			steps = steps[:64*4]
		}
		for ; len(steps) >= 4; steps = steps[4:] {
			tok := "t" + strconv.Itoa(int(steps[1]&3))
			now += int64(int8(steps[3])) * 20 * 1000 // ±2.5 s in 20 ms steps
			if steps[0]&4 != 0 {
				got, want := slots.Release(t, key, p, tok, now), local.ReleaseSlot(&st, tok, now)
				if got != want {
					t.Fatalf("release %s at +%dµs: lua %v, go %v", tok, now-algotest.T0, got, want)
				}
				continue
			}
			ttl := ttls[int(steps[2])%len(ttls)]
			got := slots.Acquire(t, key, p, tok, ttl, now)
			want := local.AcquireSlot(&st, p.Limit, tok, ttl, now)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if got.Allowed != want.Allowed || got.Limit != want.Limit || got.Remaining != want.Remaining || got.RetryAfterMs != want.RetryAfterMs || got.ResetAfterMs != want.ResetAfterMs {
				t.Fatalf("limit %d acquire %s ttl %d at +%dµs: lua %+v, go %+v", p.Limit, tok, ttl, now-algotest.T0, got, want)
			}
		}
	})
}
