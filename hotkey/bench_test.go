package hotkey

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

func BenchmarkObserve(b *testing.B) {
	b.Run("cold", func(b *testing.B) {
		c := newClock()
		h := newLayer(b, newStore(c), c, Config{})
		p := hotPolicy(limit.HotLease, 1_000_000_000)
		keys := make([]string, 1<<16)
		for i := range keys {
			keys[i] = "tenant:" + strconv.Itoa(i)
		}
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if h.Observe(keys[i&(len(keys)-1)], p, t0) {
					b.Error("a cold key is hot")
					return
				}
				i++
			}
		})
	})
	for _, thr := range []int64{1000, 100_000} {
		b.Run("hot/threshold="+strconv.FormatInt(thr, 10), func(b *testing.B) {
			c := newClock()
			h := newLayer(b, newStore(c), c, Config{})
			p := hotPolicy(limit.HotLease, thr)
			for range thr {
				h.Observe("acme", p, t0)
			}
			if !h.Observe("acme", p, t0) {
				b.Fatal("setup: the key is not hot")
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !h.Observe("acme", p, t0) {
						b.Error("the hot key cooled")
						return
					}
				}
			})
		})
	}
}

// BenchmarkLeaseHit measures a take answered from leased tokens: the
// bucket is large enough that claims are rare, which the benchmark checks.
func BenchmarkLeaseHit(b *testing.B) {
	for _, par := range []bool{false, true} {
		b.Run(map[bool]string{false: "serial", true: "parallel"}[par], func(b *testing.B) {
			c := newClock()
			store := newStore(c)
			h := newLayer(b, store, c, Config{})
			p := &limit.Policy{Name: "api", Limit: 1 << 30, Rate: 1 << 30, Period: time.Second,
				Hot: limit.Hot{Mode: limit.HotLease, Threshold: 1000}}
			for range 1_000_000 {
				h.Observe("acme", p, t0)
			}
			run := func(reqs []limit.Request, out []limit.Result) {
				reqs[0] = limit.Request{Key: "acme", Cost: 1, Policy: p}
				h.Decide(context.Background(), reqs, out)
				if !out[0].Allowed || out[0].DecidedBy != limit.ByLease {
					b.Errorf("not admitted by lease: %+v", out[0])
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			if par {
				b.RunParallel(func(pb *testing.PB) {
					reqs, out := make([]limit.Request, 1), make([]limit.Result, 1)
					for pb.Next() {
						run(reqs, out)
					}
				})
			} else {
				reqs, out := make([]limit.Request, 1), make([]limit.Result, 1)
				for b.Loop() {
					run(reqs, out)
				}
			}
			b.StopTimer()
			if s := h.Stats(); s.LeaseHits < int64(b.N) || s.Claims*100 > s.LeaseHits+100 {
				b.Fatalf("%d lease hits and %d claims for %d takes: not the hit path", s.LeaseHits, s.Claims, b.N)
			}
		})
	}
}
