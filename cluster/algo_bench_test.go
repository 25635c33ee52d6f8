package cluster

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// redisCPU sums used_cpu_sys and used_cpu_user of every primary, in µs.
func redisCPU(b *testing.B, c *localredis.Cluster) float64 {
	b.Helper()
	var total float64
	for _, n := range c.Primaries() {
		info, err := n.Client().Info(context.Background(), "cpu").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
				f, _ := strconv.ParseFloat(v, 64)
				total += f * 1e6
			}
		}
	}
	return total
}

// BenchmarkAlgorithms runs every algorithm's script side by side on one
// real 3+3 cluster (50 goroutines, uniform keys, one take per Do), and
// RL.MTAKE's multi-key script on two keys of one slot; besides ns/op it
// reports Redis CPU per decision, from INFO cpu of the primaries.
func BenchmarkAlgorithms(b *testing.B) {
	c := redistest.NewCluster(b, localredis.Config{})
	s, err := New(Config{Addrs: c.Addrs(), Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const keys = 100_000
	for _, alg := range append(limit.Algorithms, "mtake-2-keys") {
		b.Run(string(alg), func(b *testing.B) {
			p := &limit.Policy{Algorithm: alg, Limit: 1 << 40, Rate: 1_000_000_000, Period: time.Second}
			multi := alg == "mtake-2-keys"
			if multi {
				p.Algorithm = limit.TokenBucket
			}
			cpu0 := redisCPU(b, c)
			b.SetParallelism(25) // 50 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				out := make([]limit.Result, 2)
				one := []limit.Request{{Cost: 1, Policy: p}}
				two := []limit.Request{{Cost: 1, Policy: p}, {Cost: 1, Policy: p}}
				i := 0
				for pb.Next() {
					k := strconv.Itoa(i * 7919 % keys)
					i++
					if multi {
						two[0].Key, two[1].Key = "{b"+k+"}:ip", "{b"+k+"}:acct"
						if !s.DoAll(context.Background(), two, out) {
							b.Fatalf("%+v", out)
						}
						continue
					}
					one[0].Key = "algo:" + k
					s.Do(context.Background(), one, out[:1])
					if out[0].Err != nil || !out[0].Allowed {
						b.Fatalf("%+v", out[0])
					}
				}
			})
			b.StopTimer()
			b.ReportMetric((redisCPU(b, c)-cpu0)/float64(b.N), "redis-cpu-µs/op")
		})
	}
}
