package limiter

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-rl/sluice/internal/tracing"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// traceMatcher: keys "a:…" are policy a (limit 2), "b:…" policy b, the
// rest match nothing.
func traceMatcher() Matcher {
	a := &limit.Policy{Name: "a", Limit: 2, Rate: 2, Period: time.Hour, OnStoreError: limit.FailClosed}
	b := &limit.Policy{Name: "b", Limit: 100, Rate: 100, Period: time.Hour, OnStoreError: limit.FailClosed}
	return MatcherFunc(func(k string) *limit.Policy {
		switch k[0] {
		case 'a':
			return a
		case 'b':
			return b
		}
		return nil
	})
}

// TestDecideSpan: one sluice.decide span per Decide, with the door, the
// batch size, the policy and decided_by (one value, or the distinct
// values sorted and comma-joined), the counts, and a decision event per
// request up to tracing.MaxEvents.
func TestDecideSpan(t *testing.T) {
	many := make([]string, 40)
	for i := range many {
		many[i] = fmt.Sprintf("b:%d", i)
	}
	for _, tc := range []struct {
		name   string
		front  string
		keys   []string
		attrs  map[attribute.Key]any
		events int
	}{
		{"one policy", "http", []string{"a:1", "a:1", "a:1"}, map[attribute.Key]any{
			tracing.Door: "http", tracing.BatchSize: int64(3), tracing.Policy: "a", tracing.DecidedBy: "embedded",
			tracing.Allowed: int64(2), tracing.Rejected: int64(1), tracing.Errors: int64(0)}, 3},
		{"two policies and no policy", "", []string{"b:1", "a:2", "nomatch"}, map[attribute.Key]any{
			tracing.Door: "resp", tracing.BatchSize: int64(3), tracing.Policy: "a,b", tracing.DecidedBy: "embedded",
			tracing.Allowed: int64(2), tracing.Rejected: int64(0), tracing.Errors: int64(1)}, 3},
		{"events capped", "grpc", many, map[attribute.Key]any{tracing.BatchSize: int64(40), tracing.Allowed: int64(40)}, tracing.MaxEvents},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			l, err := New(Config{Policies: traceMatcher(), Store: local.New(local.Config{DecidedBy: limit.ByEmbedded}), Tracer: tp.Tracer("test")})
			if err != nil {
				t.Fatal(err)
			}
			reqs := make([]limit.Request, len(tc.keys))
			for i, k := range tc.keys {
				reqs[i] = limit.Request{Key: k, Cost: 1}
			}
			ctx := context.Background()
			if tc.front != "" {
				ctx = limit.WithFront(ctx, tc.front)
			}
			l.Decide(ctx, reqs, make([]limit.Result, len(reqs)))
			spans := rec.Ended()
			if len(spans) != 1 || spans[0].Name() != tracing.SpanDecide {
				t.Fatalf("%d spans (%v), want one %s", len(spans), spans, tracing.SpanDecide)
			}
			got := map[attribute.Key]any{}
			for _, kv := range spans[0].Attributes() {
				got[kv.Key] = kv.Value.AsInterface()
			}
			for k, want := range tc.attrs {
				if got[k] != want {
					t.Errorf("%s = %v, want %v", k, got[k], want)
				}
			}
			if n := len(spans[0].Events()); n != tc.events {
				t.Errorf("%d events, want %d", n, tc.events)
			}
		})
	}
}

// TestDecideTracingOff: with no Tracer, Decide allocates nothing on the
// in-process store and hands the store the caller's context itself; with
// a tracer whose sampler drops everything, no span is recorded.
func TestDecideTracingOff(t *testing.T) {
	p := &limit.Policy{Name: "all", Limit: 1_000_000_000, Rate: 1_000_000_000, Period: time.Second, OnStoreError: limit.FailOpen}
	l, err := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: local.New(local.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	reqs := []limit.Request{{Key: "k", Cost: 1}}
	out := make([]limit.Result, 1)
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		reqs[0].Policy = nil
		l.Decide(ctx, reqs, out)
	}); n != 0 {
		t.Errorf("Decide with tracing off: %v allocations, want 0", n)
	}

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.NeverSample()))
	l, err = New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: local.New(local.Config{}), Tracer: tp.Tracer("test")})
	if err != nil {
		t.Fatal(err)
	}
	l.Decide(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), reqs, out)
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d spans recorded under NeverSample, want 0", n)
	}
}
