package cluster

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/internal/tracing"
	"github.com/sluice-rl/sluice/limit"
)

// TestStoreSpans: concurrent callers, each Do under a span of its own,
// against one real redis-server: every Do gets one sluice.store span (one
// node), the child of its caller's span, with its own batch size and the
// size of the pipeline it rode in, which other callers' units may share
// (never less than its own); a Do under no recording span gets none. Run
// with -race: the pipeline size is written by whichever goroutine sent
// the unit and read by its caller.
func TestStoreSpans(t *testing.T) {
	node := redistest.NewSingle(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := tp.Tracer("test")
	s, err := New(Config{URL: "redis://" + node.Addr, Timeout: 5 * time.Second, Tracer: tr})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := &limit.Policy{Name: "t", Limit: 1 << 20, Rate: 1 << 20, Period: time.Second}

	const callers, calls = 8, 25
	parents := make(chan string, callers*calls)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range calls {
				n := 1 + (c+i)%5 // 1 to 5 keys a Do
				reqs := make([]limit.Request, n)
				for j := range reqs {
					reqs[j] = limit.Request{Key: fmt.Sprintf("span:%d:%d:%d", c, i, j), Cost: 1, Policy: p}
				}
				ctx, span := tr.Start(context.Background(), "caller", trace.WithAttributes(attribute.Int("n", n)))
				out := make([]limit.Result, n)
				s.Do(ctx, reqs, out)
				span.End()
				for j := range out {
					if out[j].Err != nil || !out[j].Allowed {
						t.Errorf("%s: %+v", reqs[j].Key, out[j])
					}
				}
				parents <- span.SpanContext().SpanID().String()
			}
		})
	}
	wg.Wait()
	close(parents)
	// A Do without a recording span starts none.
	s.Do(context.Background(), []limit.Request{{Key: "span:untraced", Cost: 1, Policy: p}}, make([]limit.Result, 1))

	want := map[string]int64{} // caller span id → its batch size
	for _, sp := range rec.Ended() {
		if sp.Name() == "caller" {
			for _, kv := range sp.Attributes() {
				if kv.Key == "n" {
					want[sp.SpanContext().SpanID().String()] = kv.Value.AsInt64()
				}
			}
		}
	}
	got := map[string]int64{}
	stores, shared := 0, 0
	for _, sp := range rec.Ended() {
		if sp.Name() != tracing.SpanStore {
			continue
		}
		stores++
		a := map[attribute.Key]attribute.Value{}
		for _, kv := range sp.Attributes() {
			a[kv.Key] = kv.Value
		}
		parent := sp.Parent().SpanID().String()
		got[parent] += a[tracing.BatchSize].AsInt64()
		if a[tracing.PipelineSize].AsInt64() > a[tracing.BatchSize].AsInt64() {
			shared++
		}
		if a[tracing.PipelineSize].AsInt64() < a[tracing.BatchSize].AsInt64() {
			t.Errorf("store span: pipeline size %d below its batch size %d", a[tracing.PipelineSize].AsInt64(), a[tracing.BatchSize].AsInt64())
		}
		if addr := a[tracing.ServerAddr].AsString() + ":" + strconv.FormatInt(a[tracing.ServerPort].AsInt64(), 10); addr != node.Addr {
			t.Errorf("store span names %s, want the node %s", addr, node.Addr)
		}
	}
	t.Logf("%d of %d store spans rode in a pipeline shared with other callers", shared, stores)
	if stores != callers*calls {
		t.Errorf("%d store spans for %d traced Do calls to one node, want one each", stores, callers*calls)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("store spans' batch sizes by parent differ from the callers':\n got %v\nwant %v", got, want)
	}
}
