package cluster

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
)

// discardSpans is a span exporter that counts what it is given and drops
// it, so that a benchmark measures making spans, not sending them.
type discardSpans struct{ n atomic.Int64 }

func (d *discardSpans) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	d.n.Add(int64(len(s)))
	return nil
}
func (*discardSpans) Shutdown(context.Context) error { return nil }

// BenchmarkDecideStoreTracing is the limiter over this store and one real
// redis-server, one caller, 1 and 16 keys per Decide, with tracing off
// (nil tracers, as `sluice serve` without --otlp-endpoint) and on with
// every batch sampled (a sluice.decide span and a sluice.store span per
// Decide, exported to nowhere by the SDK's batch processor): what a span
// costs the client next to a round trip. client-cpu-µs/decision is this
// process's CPU (getrusage), the Go runtime and the exporter included.
func BenchmarkDecideStoreTracing(b *testing.B) {
	node := redistest.NewSingle(b)
	p := &limit.Policy{Name: "bench", Limit: 1 << 40, Rate: 1_000_000_000, Period: time.Second, OnStoreError: limit.FailClosed}
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = "trace:" + strconv.Itoa(i)
	}
	for _, on := range []bool{false, true} {
		for _, n := range []int{1, 16} {
			name := "off"
			if on {
				name = "on-sampled-100"
			}
			b.Run(name+"/keys-per-Decide="+strconv.Itoa(n), func(b *testing.B) {
				exp := &discardSpans{}
				cfg := Config{URL: "redis://" + node.Addr, Timeout: 5 * time.Second}
				var tp *sdktrace.TracerProvider
				if on {
					tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
					cfg.Tracer = tp.Tracer("bench")
				}
				s, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				lcfg := limiter.Config{Policies: limiter.MatcherFunc(func(string) *limit.Policy { return p }), Store: s, Timeout: func() time.Duration { return 5 * time.Second }}
				if tp != nil {
					lcfg.Tracer = tp.Tracer("bench")
				}
				l, err := limiter.New(lcfg)
				if err != nil {
					b.Fatal(err)
				}
				reqs := make([]limit.Request, n)
				out := make([]limit.Result, n)
				j := 0
				run := func() {
					for i := range reqs {
						reqs[i] = limit.Request{Key: keys[j%len(keys)], Cost: 1}
						j++
					}
					l.Decide(context.Background(), reqs, out)
					for i := range out {
						if out[i].Err != nil || !out[i].Allowed || out[i].DecidedBy != limit.ByStore {
							b.Fatalf("result %d: %+v", i, out[i])
						}
					}
				}
				measure(b, run, float64(n))
				if tp == nil {
					return
				}
				if err := tp.Shutdown(context.Background()); err != nil {
					b.Fatal(err)
				}
				if exp.n.Load() == 0 {
					b.Fatal("tracing on, and no span exported")
				}
			})
		}
	}
}
