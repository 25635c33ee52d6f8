package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// TestRegionGlobalMadeRegionalOnTheOtherInstance: two sluice processes of
// region eu, a global gl (10 + 5/s) spent on p1 alone, then RL.POLICY SET
// makes gl regional and p2, which never saw the key, takes it at once.
// One budget spans the change: admitted over the whole interval stays
// within 10 + 5/s × T plus the region layer's slack (rate × the
// allocator's horizon, and the floor, 2 + 1/s × T, debited later). Before
// (the long check: 16 admitted in 6 ms against 13.83): p2 found the
// regional bucket full and admitted 10 beside what p1's pool had.
func TestRegionGlobalMadeRegionalOnTheOtherInstance(t *testing.T) {
	t.Parallel()
	home := redistest.NewSingle(t)
	eu := redistest.NewCluster(t, localredis.Config{Primaries: 3, Replicas: -1})
	cfg := writeConfig(t, `defaults:
  on_store_error: closed
policies:
  - name: gl
    match: "gl.*.g"
    limit: 10
    rate: 5
    period: 1s
    scope: global
    region_floor: 0.2
  - name: other
    match: "*"
    limit: 5
    rate: 1
    period: 1s
`)
	args := []string{"--cluster", strings.Join(eu.Addrs(), ","), "--region", "eu", "--home-redis", "redis://" + home.Addr, "--config", cfg}
	p1, p2 := startSluice(t, args...), startSluice(t, args...)
	c1, c2 := p1.client(t), p2.client(t)
	ctx := context.Background()
	const key = "gl.i1.a.g"

	admitted, by := 0, map[string]int{}
	var first, last time.Time
	count := func(r reply) {
		if !r.Allowed {
			return
		}
		now := time.Now()
		if admitted == 0 {
			first = now
		}
		last = now
		admitted++
		by[r.DecidedBy]++
	}
	// p1 spends the global budget: the floor until its first claim is
	// answered, then its pool.
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		r, err := take(ctx, c1, key, 1)
		if err != nil {
			t.Fatal(err)
		}
		count(r)
		time.Sleep(2 * time.Millisecond)
	}
	if by["region"] == 0 {
		t.Fatalf("global gl on p1: admitted %d %v, want decided_by region", admitted, by)
	}
	global := admitted
	if err := c1.Do(ctx, "RL.POLICY", "SET", "gl", `{"match": "gl.*.g", "limit": 10, "rate": 5, "period": "1s", "on_store_error": "closed"}`).Err(); err != nil {
		t.Fatal(err)
	}
	// Another key of gl tells when p2 has the regional policy in force.
	for deadline := time.Now().Add(5 * time.Second); ; {
		r, err := take(ctx, c2, "gl.probe.x.g", 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.DecidedBy == "store" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("p2 never put the regional gl in force")
		}
		time.Sleep(time.Millisecond)
	}
	// p2 never took the key: its burst.
	for range 20 {
		r, err := take(ctx, c2, key, 1)
		if err != nil {
			t.Fatal(err)
		}
		count(r)
	}
	T := last.Sub(first).Seconds()
	horizon := 0.2
	bound := 10 + 5*(T+horizon) + 2 + 1*T
	t.Logf("admitted %d in %.3fs (%d while global on p1), bound %.2f; decided_by %v", admitted, T, global, bound, by)
	if float64(admitted) > bound {
		t.Fatalf("admitted %d in %.3fs across the change to regional, bound %.2f: decided_by %v", admitted, T, bound, by)
	}
	// Emptied once: a second later the bucket has refilled by the rate.
	time.Sleep(time.Second)
	again := 0
	for range 10 {
		r, err := take(ctx, c2, key, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			again++
		}
	}
	if again < 4 {
		t.Fatalf("1 s after: p2 admitted %d of 10, want about 5 (the regional bucket refills from empty)", again)
	}
}
