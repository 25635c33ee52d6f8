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

// Issue 28 §3k, after the unpayable demand: the long check found 15
// admitted in 4 ms against 13.83 (floor included) on a global key of
// 10 + 5/s, decided by the region, whose only earlier request was one
// refused take. The allocator claimed for that demand, nothing spent it,
// and the pool kept the tokens while home's bucket refilled to full
// beside them: a burst a second later got the pool, home's whole bucket
// by claims, and the floor of the instance that had not seen the key. A
// pool's stale tokens beyond limit + rate × horizon go back home.
func TestStalePoolIsGivenBack(t *testing.T) {
	t.Parallel()
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
	var ls []*Layer
	for i := range 2 { // two instances of region eu, at the default tick
		l, err := New(regional, Config{Region: "eu", Instance: string(rune('0' + i)), Home: home})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ls = append(ls, l)
	}
	p := &limit.Policy{Name: "gl", Match: "gl.*", Algorithm: limit.TokenBucket, Limit: 10, Rate: 5, Period: time.Second,
		OnStoreError: limit.FailClosed, Scope: limit.ScopeGlobal, RegionFloor: 0.2}
	const key = "gl.i658.a.g"
	ctx := context.Background()
	take := func(l *Layer, cost int64) limit.Result {
		out := make([]limit.Result, 1)
		l.Store().Do(ctx, []limit.Request{{Key: key, Cost: cost, Op: limit.OpTake, Policy: p}}, out)
		if out[0].Err != nil {
			t.Fatal(out[0].Err)
		}
		return out[0]
	}
	// One take of 3 on the first instance, refused: the key is new, its
	// pool empty, and its floor (2) cannot pay 3. Its demand makes the
	// allocator claim; nothing spends what it claims.
	if r := take(ls[0], 3); r.Allowed {
		t.Fatalf("the first take of 3 of a new key was admitted (%+v), want refused", r)
	}
	// Quiet: until the allocator has claimed for it, then until home's
	// bucket is full again (before the key has been quiet for 3 s, when
	// its pool goes home anyway).
	deadline := time.Now().Add(5 * time.Second)
	for _, until := range []struct {
		what string
		done func() bool
	}{
		{"the pool holds tokens", func() bool { return peek(t, regional, key, ls[0].derive(p).pool) > 0 }},
		{"home's bucket is full", func() bool { return peek(t, home, key, p) == p.Limit }},
	} {
		for !until.done() {
			if time.Now().After(deadline) {
				t.Fatalf("5 s after the take, not yet: %s", until.what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	pool := peek(t, regional, key, ls[0].derive(p).pool)
	// A burst from both instances for 100 ms: at most limit + rate × (T +
	// horizon), plus the floor's own limit + rate × (T + horizon).
	start := time.Now()
	var admitted, asked int64
	for i := 0; time.Since(start) < 100*time.Millisecond; i++ {
		asked++
		if take(ls[i%2], 1).Allowed {
			admitted++
		}
	}
	T := (time.Since(start) + ls[0].horizon()).Seconds()
	f := p.Floor()
	bound := float64(p.Limit) + float64(p.Rate)*T + float64(f.Limit) + float64(f.Rate)*T
	s := ls[0].Snapshot()
	t.Logf("the pool held %d beside home's full bucket (%d given back as stale); the burst admitted %d of %d asked, bound %.2f (floor included)",
		pool, s.Trimmed, admitted, asked, bound)
	if float64(admitted) > bound {
		t.Errorf("admitted %d > %.2f: the pool kept tokens nothing spent while home's bucket refilled beside them", admitted, bound)
	}
}
