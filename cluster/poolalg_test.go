package cluster

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// A region's pool (limit.Pool) rides every store path with no special
// case: the batch script and per-key scripts across every node, NOSCRIPT
// reload, and the multi script. An absent pool is empty, a fill writes it
// with its TTL, and a pool spent to 0 is deleted.
func TestPoolOnTheStorePaths(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	ctx := context.Background()
	p := &limit.Policy{Name: "pool", Algorithm: limit.Pool, Limit: 5, Rate: 5, Period: time.Second} // 200 ms a token, TTL 10 s
	cc := c.ClusterClient()
	for _, perKey := range []bool{false, true} {
		t.Run("perKey="+strconv.FormatBool(perKey), func(t *testing.T) {
			s, err := New(Config{Addrs: c.Addrs(), Timeout: 5 * time.Second, PerKey: perKey})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			prefix := "pool" + strconv.FormatBool(perKey) + ":"
			keys := make([]string, 60)
			nodes := map[int]bool{}
			for i := range keys {
				keys[i] = prefix + strconv.Itoa(i)
				nodes[Slot(Key(keys[i]))*3/16384] = true
			}
			if len(nodes) != 3 {
				t.Fatalf("keys cover %d thirds of the slots, want 3", len(nodes))
			}
			do := func(step string, cost int64, op limit.Op, want limit.Result) {
				t.Helper()
				reqs := make([]limit.Request, len(keys))
				for i, k := range keys {
					reqs[i] = limit.Request{Key: k, Cost: cost, Op: op, Policy: p}
				}
				out := make([]limit.Result, len(keys))
				s.Do(ctx, reqs, out)
				for i, r := range out {
					if r != want {
						t.Fatalf("%s: key %d: %+v, want %+v", step, i, r, want)
					}
				}
			}
			exists := func(step string, want int64) {
				t.Helper()
				for _, k := range keys {
					if n, err := cc.Exists(ctx, Key(k)).Result(); err != nil || n != want {
						t.Fatalf("%s: EXISTS %s = %d, %v; want %d", step, Key(k), n, err, want)
					}
				}
			}
			res := func(allowed bool, remaining, retry, reset, granted int64) limit.Result {
				return limit.Result{Allowed: allowed, Limit: 5, Remaining: remaining, RetryAfterMs: retry, ResetAfterMs: reset, Granted: granted, DecidedBy: limit.ByStore}
			}
			do("absent", 1, limit.OpTake, res(false, 0, 200, 1000, 0))
			exists("absent", 0)
			do("fill", 3, limit.OpReturn, res(true, 3, -1, 400, 0))
			ttl, err := cc.PTTL(ctx, Key(keys[0])).Result()
			if err != nil || ttl <= 8*time.Second || ttl > 10*time.Second {
				t.Fatalf("PTTL after a fill %v, %v; want (8s, 10s]", ttl, err)
			}
			do("take 2", 2, limit.OpTake, res(true, 1, -1, 800, 0))
			do("take 2 of 1", 2, limit.OpTake, res(false, 1, 200, 800, 0))
			if err := c.ScriptFlushAll(ctx); err != nil {
				t.Fatal(err)
			}
			do("after SCRIPT FLUSH", 1, limit.OpTake, res(true, 0, -1, 1000, 0))
			exists("spent", 0)
			do("fill 9", 9, limit.OpReturn, res(true, 5, -1, 0, 0))
			do("claim 7", 7, limit.OpClaim, res(true, 0, -1, 1000, 5))
			exists("drained", 0)

			// the multi script: two pools of one slot, all or nothing
			a, b := "{"+prefix+"m}:a", "{"+prefix+"m}:b"
			fill := []limit.Request{{Key: a, Cost: 2, Op: limit.OpReturn, Policy: p}, {Key: b, Cost: 1, Op: limit.OpReturn, Policy: p}}
			s.Do(ctx, fill, make([]limit.Result, 2))
			both := []limit.Request{{Key: a, Cost: 1, Policy: p}, {Key: b, Cost: 1, Policy: p}}
			out := make([]limit.Result, 2)
			if ok := s.DoAll(ctx, both, out); !ok || out[0].Remaining != 1 || out[1].Remaining != 0 {
				t.Fatalf("first all-or-nothing take: %v %+v, want both taken (1 and 0 left)", ok, out)
			}
			if ok := s.DoAll(ctx, both, out); ok || out[0] != res(true, 1, -1, 800, 0) || out[1] != res(false, 0, 200, 1000, 0) {
				t.Fatalf("second all-or-nothing take: %v %+v, want refused, a still 1", ok, out)
			}
		})
	}
}
