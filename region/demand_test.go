package region

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// newLayer is one instance of region eu over a real 3-primary Redis
// Cluster, with a home redis-server, at the default tick (as `sluice
// serve` runs it); it returns the layer and the home store.
func newLayer(t *testing.T) (*Layer, *cluster.Store) {
	t.Helper()
	c := redistest.NewCluster(t, localredis.Config{Primaries: 3, Replicas: -1})
	regional, err := cluster.New(cluster.Config{Addrs: c.Addrs(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { regional.Close() })
	home, err := cluster.New(cluster.Config{URL: "redis://" + redistest.NewSingle(t).Addr, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { home.Close() })
	l, err := New(regional, Config{Region: "eu", Instance: "0", Home: home})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, home
}

// peek returns what a peek of key under p answers from st.
func peek(t *testing.T, st limit.Store, key string, p *limit.Policy) int64 {
	t.Helper()
	out := make([]limit.Result, 1)
	st.Do(context.Background(), []limit.Request{{Key: key, Cost: 1, Op: limit.OpPeek, Policy: p}}, out)
	if out[0].Err != nil {
		t.Fatal(out[0].Err)
	}
	return out[0].Remaining
}

// Issue 28 §3k, the long check's one violation in 189,848 operations: a
// global key (token_bucket 10 + 5/s) admitted 14 in 5 ms, against a
// bound of 13.83, after RL.MTAKEs of 40 on it were refused by the region.
// A cost above the limit can never be paid, but it was counted as demand:
// 40 asked per call made the allocator claim for 200/s while nothing was
// spent, the pool filled to the limit and stayed there while home's bucket
// refilled to full beside it, and the next burst got the pool's 10 and a
// claim's 5 from home, in one round trip. A request no pool can pay, and
// a member of a refused RL.MTAKE that its own pool could pay, are no
// demand: nothing of them is ever spent.
func TestUnpayableDemandFillsNoPool(t *testing.T) {
	t.Parallel()
	l, home := newLayer(t)
	p := &limit.Policy{Name: "gl", Match: "gl.*", Algorithm: limit.TokenBucket, Limit: 10, Rate: 5, Period: time.Second,
		OnStoreError: limit.FailClosed, Scope: limit.ScopeGlobal, RegionFloor: 0.2}
	const key = "gl.i23.b.g"
	st := l.Store()
	ctx := context.Background()
	// The history: an RL.MTAKE of 40 every 200 ms for 1.2 s, each refused
	// (time passing is part of it, as the checker's wait action).
	for range 6 {
		out := make([]limit.Result, 1)
		if st.(limit.Atomic).DoAll(ctx, []limit.Request{{Key: key, Cost: 40, Op: limit.OpTake, Policy: p}}, out) || out[0].Err != nil {
			t.Fatalf("RL.MTAKE %s 40 on a limit of 10: %+v, want refused", key, out[0])
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Then quiet, until home's bucket is full again.
	deadline := time.Now().Add(5 * time.Second)
	for peek(t, home, key, p) < p.Limit {
		if time.Now().After(deadline) {
			t.Fatalf("home's bucket of %s still below %d 5 s after the last take", key, p.Limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	pool := peek(t, l.inner, key, l.derive(p).pool)
	// A burst of takes for 100 ms: at most limit + rate × (T + horizon),
	// a pooled token being claimed up to one horizon before it is admitted.
	start := time.Now()
	var admitted, asked int64
	for time.Since(start) < 100*time.Millisecond {
		out := make([]limit.Result, 1)
		st.Do(ctx, []limit.Request{{Key: key, Cost: 1, Op: limit.OpTake, Policy: p}}, out)
		if out[0].Err != nil {
			t.Fatal(out[0].Err)
		}
		asked++
		if out[0].Allowed {
			admitted++
		}
	}
	T := time.Since(start) + l.horizon()
	bound := float64(p.Limit) + float64(p.Rate)*T.Seconds()
	t.Logf("the pool held %d beside home's full bucket; the burst admitted %d of %d asked, bound %.2f (T + horizon = %v)",
		pool, admitted, asked, bound, T.Round(time.Millisecond))
	if float64(admitted) > bound {
		t.Errorf("admitted %d > limit + rate × (T + horizon) = %.2f: the pool kept tokens claimed for a demand that spent nothing", admitted, bound)
	}
}
