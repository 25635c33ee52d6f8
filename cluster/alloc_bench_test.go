package cluster

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// BenchmarkDoAllocs measures what one Store.Do costs the client, per
// decision, against one real redis-server: a single key (one caller, so
// the node is idle and the caller sends its own pipeline: the inline
// path), a batch of 16 keys in one Do (one call of the batch script), and
// single keys from 16 concurrent callers (the worker path, batches built
// from several callers). Run with -benchmem: allocs/op ÷ decisions/op is
// the allocations per decision; client-cpu-µs/decision is this process's
// CPU (getrusage), the Go runtime included. The before/after figures of
// pooling the per-request objects are in docs/performance.md ("The client side of the store path").
func BenchmarkDoAllocs(b *testing.B) {
	node := redistest.NewSingle(b)
	s, err := New(Config{URL: "redis://" + node.Addr, Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	p := &limit.Policy{Limit: 1 << 40, Rate: 1_000_000_000, Period: time.Second}
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = "alloc:" + strconv.Itoa(i)
	}
	check := func(b *testing.B, out []limit.Result) {
		for i := range out {
			if out[i].Err != nil || !out[i].Allowed || out[i].DecidedBy != limit.ByStore {
				b.Fatalf("result %d: %+v", i, out[i])
			}
		}
	}
	for _, n := range []int{1, 16} {
		b.Run("keys-per-Do="+strconv.Itoa(n), func(b *testing.B) {
			reqs := make([]limit.Request, n)
			out := make([]limit.Result, n)
			for i := range reqs {
				reqs[i] = limit.Request{Cost: 1, Policy: p}
			}
			j := 0
			run := func() {
				for i := range reqs {
					reqs[i].Key = keys[j%len(keys)]
					j++
				}
				s.Do(context.Background(), reqs, out)
				check(b, out)
			}
			_, c0, d0 := allTotals(s)
			measure(b, run, float64(n))
			_, c1, d1 := allTotals(s)
			if n > 1 && d1-d0 <= c1-c0 { // the batch script was used: more decisions than calls
				b.Fatalf("%d decisions by %d script calls: not batched", d1-d0, c1-c0)
			}
		})
	}
	b.Run("callers=16", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(8) // 16 goroutines on 2 cores
		cpu0, sched0, u0 := processCPU(b), readSched(b), unitsOf(s)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			reqs := []limit.Request{{Cost: 1, Policy: p}}
			out := make([]limit.Result, 1)
			j := 0
			for pb.Next() {
				reqs[0].Key = keys[j%len(keys)]
				j += 7
				s.Do(context.Background(), reqs, out)
				check(b, out)
			}
		})
		b.StopTimer()
		b.ReportMetric((processCPU(b)-cpu0)/float64(b.N), "client-cpu-µs/decision")
		reportSched(b, sched0, float64(b.N))
		reportUnits(b, s, u0, float64(b.N))
	})
}
