package limiter

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-rl/sluice/internal/tracing"
	"github.com/sluice-rl/sluice/limit"
)

// startDecide starts the span of one Decide batch, a child of the door's
// span in ctx (HTTP, gRPC) or a root (RESP, whose commands carry no trace
// context): docs/tracing.md.
// The attributes are set once the span is known to record: a batch the
// sampler drops costs no attribute slice.
func (l *Limiter) startDecide(ctx context.Context, n int) (context.Context, trace.Span) {
	ctx, span := l.tracer.Start(ctx, tracing.SpanDecide, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(tracing.Door.String(limit.FrontOf(ctx)), tracing.BatchSize.Int(n))
	}
	return ctx, span
}

// endDecide sets what the batch decided on its span and ends it: the
// policies and the paths that decided (one value, or the distinct values
// sorted and comma-joined, so that a search for a policy or a decided_by
// is one string match in Jaeger and Tempo alike), the counts, and an
// event per request for the first tracing.MaxEvents.
func endDecide(span trace.Span, reqs []limit.Request, out []limit.Result) {
	defer span.End()
	if !span.IsRecording() { // not sampled
		return
	}
	var policies, by tracing.Names
	var allowed, rejected, errs int
	var firstErr error
	for i := range out {
		r := &out[i]
		var p string
		if i < len(reqs) && reqs[i].Policy != nil {
			p = reqs[i].Policy.Name
			policies.Add(p)
		}
		switch {
		case r.Err != nil:
			errs++
			if firstErr == nil && !errors.Is(r.Err, limit.ErrNoPolicy) {
				firstErr = r.Err
			}
		case r.Allowed:
			allowed++
		default:
			rejected++
		}
		if r.Err == nil {
			by.Add(r.DecidedBy)
		}
		if i < tracing.MaxEvents {
			span.AddEvent(tracing.EventDecision, trace.WithAttributes(decisionAttrs(i, p, r)...))
		}
	}
	attrs := []attribute.KeyValue{tracing.Allowed.Int(allowed), tracing.Rejected.Int(rejected), tracing.Errors.Int(errs)}
	if len(policies) > 0 {
		attrs = append(attrs, tracing.Policy.String(policies.String()))
	}
	if len(by) > 0 {
		attrs = append(attrs, tracing.DecidedBy.String(by.String()))
	}
	span.SetAttributes(attrs...)
	if firstErr != nil {
		tracing.Fail(span, firstErr)
	}
}

// decisionAttrs are the attributes of request i's decision event.
func decisionAttrs(i int, policyName string, r *limit.Result) []attribute.KeyValue {
	kv := []attribute.KeyValue{tracing.Index.Int(i), tracing.Policy.String(policyName)}
	if r.Err != nil {
		return append(kv, attribute.String("exception.message", r.Err.Error()))
	}
	return append(kv, tracing.DecidedBy.String(r.DecidedBy), tracing.Admitted.Bool(r.Allowed),
		tracing.Remaining.Int64(r.Remaining), tracing.RetryAfterMs.Int64(r.RetryAfterMs))
}
