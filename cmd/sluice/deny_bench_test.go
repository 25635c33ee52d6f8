package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// primariesCPU sums used_cpu_sys and used_cpu_user of every primary, in µs.
func primariesCPU(b *testing.B, c *localredis.Cluster) float64 {
	b.Helper()
	var total float64
	for _, n := range c.Primaries() {
		info, err := n.Client().Info(context.Background(), "cpu").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
				f, _ := strconv.ParseFloat(v, 64)
				total += f * 1e6
			}
		}
	}
	return total
}

const abuseConfig = `policies:
  - {name: off, match: "off:*", limit: 5, rate: 5, period: 1m, on_store_error: closed, deny_cache: false}
  - {name: on, match: "on:*", limit: 5, rate: 5, period: 1m, on_store_error: closed}
`

// BenchmarkDenyCacheAbuse is the abuse scenario of issue 22: 1,000 keys
// over their limit (5/min), nearly every request refused, 16 in flight at
// pipeline 1, against one sluice on a real 3+3 Redis Cluster; the same
// policy with deny_cache: false (off) and with the default (on), A B A B
// in one run. Besides ns/op it reports decisions/s and the primaries'
// CPU per decision (INFO cpu). Run it with a fixed count:
//
//	go test -run '^$' -bench DenyCacheAbuse -benchtime 40000x ./cmd/sluice/
func BenchmarkDenyCacheAbuse(b *testing.B) {
	c := redistest.NewCluster(b, localredis.Config{})
	p := startSluice(b, "--config", writeConfig(b, abuseConfig), "--cluster", strings.Join(c.Addrs(), ","))
	cl := p.client(b)
	ctx := context.Background()
	const keys = 1000
	for _, side := range []string{"off", "on"} {
		for k := range keys {
			for range 5 {
				if _, err := take(ctx, cl, fmt.Sprintf("%s:%d", side, k), 1); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	for round := 1; round <= 2; round++ {
		for _, side := range []string{"off", "on"} {
			b.Run(fmt.Sprintf("round%d/%s", round, side), func(b *testing.B) {
				abuse(b, c, cl, side, keys)
			})
		}
	}
}

// abuse sends b.N RL.TAKEs over keys keys of side, from 16 goroutines.
func abuse(b *testing.B, c *localredis.Cluster, cl *redis.Client, side string, keys int) {
	ctx := context.Background()
	hits0, _ := infoCount(ctx, cl, "sluice", "deny_cache_hits")
	var next, refused atomic.Int64
	var wg sync.WaitGroup
	cpu0 := primariesCPU(b, c)
	b.ResetTimer()
	start := time.Now()
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				r, err := take(ctx, cl, fmt.Sprintf("%s:%d", side, (i*7919)%int64(keys)), 1)
				if err != nil {
					b.Error(err)
					return
				}
				if !r.Allowed {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := primariesCPU(b, c) - cpu0
	hits, _ := infoCount(ctx, cl, "sluice", "deny_cache_hits")
	if f := float64(refused.Load()) / float64(b.N); b.N >= 1000 && f < 0.9 {
		b.Fatalf("%.1f%% refused: not the abuse scenario", 100*f)
	}
	if (side == "on") != (hits > hits0) && b.N >= 1000 {
		b.Fatalf("%s: %d deny-cache hits", side, hits-hits0)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(cpu/float64(b.N), "redis-cpu-µs/decision")
	b.ReportMetric(float64(hits-hits0)/float64(b.N), "cached/decision")
}
