package limiter

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// discard is a span exporter that drops what it is given, so that a
// benchmark measures making spans, not sending them.
type discard struct{ spans atomic.Int64 }

func (d *discard) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	d.spans.Add(int64(len(s)))
	return nil
}
func (*discard) Shutdown(context.Context) error { return nil }

// BenchmarkDecideTracing is BenchmarkDecideParallel's decision (one
// request a Decide, the in-process store, every core) with tracing off
// (a nil Tracer: what BenchmarkDecideParallel measures), and on with the
// SDK's batch processor sampling every root span or none: the cost a
// span adds per batch. The sampled run checks that it made a span per
// Decide.
func BenchmarkDecideTracing(b *testing.B) {
	p := &limit.Policy{Name: "all", Limit: 1_000_000_000, Rate: 1_000_000_000, Period: time.Second, OnStoreError: limit.FailOpen}
	for _, bc := range []struct {
		name   string
		sample float64 // -1: tracing off
	}{{"off", -1}, {"on-sampled-0", 0}, {"on-sampled-100", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: local.New(local.Config{})}
			exp := &discard{}
			var tp *sdktrace.TracerProvider
			if bc.sample >= 0 {
				tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(bc.sample))))
				cfg.Tracer = tp.Tracer("bench")
			}
			l, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				key := "k" + strconv.FormatInt(next.Add(1), 10)
				reqs := []limit.Request{{Key: key, Cost: 1}}
				out := make([]limit.Result, 1)
				ctx := context.Background()
				for pb.Next() {
					reqs[0].Policy = nil
					l.Decide(ctx, reqs, out)
					if !out[0].Allowed {
						b.Fatalf("%+v", out[0])
					}
				}
			})
			b.StopTimer()
			if tp == nil {
				return
			}
			if err := tp.Shutdown(context.Background()); err != nil {
				b.Fatal(err)
			}
			// The batch processor drops spans when its queue is full
			// (2048): a sampled run exports at least some, an unsampled
			// one none.
			if got := exp.spans.Load(); (bc.sample == 1) != (got > 0) {
				b.Fatalf("%d spans exported at sample ratio %v", got, bc.sample)
			}
		})
	}
}
