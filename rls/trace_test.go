package rls

import (
	"context"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluice-rl/sluice/internal/tracing"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/local"
)

// TestCollectorLinksJoinedCalls: while a call's Decide is in flight, two
// more calls gather into one batch, decided under the span of the one
// that leads it; the other call's span says it joined and links to the
// leader's, where its sluice.decide is.
func TestCollectorLinksJoinedCalls(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := tp.Tracer("test")
	p := &limit.Policy{Name: "p", Limit: 10, Rate: 10, Period: time.Hour, OnStoreError: limit.FailClosed}
	lim, err := limiter.New(limiter.Config{Policies: limiter.MatcherFunc(func(string) *limit.Policy { return p }), Store: local.New(local.Config{}), Tracer: tr})
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	d := &gateDecider{Decider: lim, gate: gate}
	col := newCollector(d)
	col.traced = true
	col.maxWait = time.Hour
	take := func(name string) {
		ctx, span := tr.Start(context.Background(), name)
		defer span.End()
		out := make([]limit.Result, 1)
		col.Decide(ctx, []limit.Request{{Key: name, Cost: 1, Op: limit.OpTake, Policy: p}}, out)
		if !out[0].Allowed {
			t.Errorf("%s: %+v", name, out[0])
		}
	}
	first := make(chan struct{})
	go func() { take("first"); close(first) }()
	pollUntil(t, "the first call to reach the Decider", func() bool { return len(d.calls()) == 1 })
	var wg sync.WaitGroup
	wg.Go(func() { take("b") })
	wg.Go(func() { take("c") })
	pollUntil(t, "both calls to gather", func() bool { return col.waiting() == 2 })
	close(gate)
	<-first
	wg.Wait()

	calls := map[string]sdktrace.ReadOnlySpan{}
	decideParent := map[string]bool{} // span ids with a sluice.decide child
	for _, s := range rec.Ended() {
		if s.Name() == tracing.SpanDecide {
			decideParent[s.Parent().SpanID().String()] = true
		} else {
			calls[s.Name()] = s
		}
	}
	if len(decideParent) != 2 || !decideParent[calls["first"].SpanContext().SpanID().String()] {
		t.Fatalf("decide spans under %v, want two: under the first call and under the batch's leader", decideParent)
	}
	lead, joined := calls["b"], calls["c"]
	if !decideParent[lead.SpanContext().SpanID().String()] {
		lead, joined = joined, lead
	}
	if decideParent[joined.SpanContext().SpanID().String()] {
		t.Fatal("both gathered calls have a decide span of their own: they were not joined")
	}
	hasJoined := func(s sdktrace.ReadOnlySpan) bool {
		for _, kv := range s.Attributes() {
			if kv.Key == tracing.Joined && kv.Value.AsBool() {
				return true
			}
		}
		return false
	}
	if !hasJoined(joined) || hasJoined(lead) || hasJoined(calls["first"]) {
		t.Errorf("sluice.joined: leader %v, joined %v, first %v; want only the joined call", hasJoined(lead), hasJoined(joined), hasJoined(calls["first"]))
	}
	if l := joined.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != lead.SpanContext().SpanID() {
		t.Errorf("joined call's links %v, want one to the leader's span %s", l, lead.SpanContext().SpanID())
	}
}
