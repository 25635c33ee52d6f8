package cluster

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-rl/sluice/internal/tracing"
)

// startUnits starts a span per unit of a round, children of the span in
// ctx (the limiter's sluice.decide), or returns nil when that one does not
// record: a batch nobody sampled costs one context lookup here.
func (s *Store) startUnits(ctx context.Context, units []*unit) []trace.Span {
	if tracing.Recording(ctx) == nil {
		return nil
	}
	spans := make([]trace.Span, len(units))
	for i, u := range units {
		attrs := append(tracing.ServerAddress(u.addr),
			tracing.DBSystem.String("redis"), tracing.DBOperation.String("EVALSHA"),
			tracing.BatchSize.Int(len(u.items)), tracing.Script.String(scriptsOf(u.items)))
		if u.redirected {
			attrs = append(attrs, attribute.Bool("sluice.redirected", true))
		}
		_, spans[i] = s.cfg.Tracer.Start(ctx, tracing.SpanStore, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	}
	return spans
}

// endUnit ends a unit's span: with what its node answered when u is not
// nil (u is done: its sender wrote it), else with err, the unit's answer
// when its waiter gave up on it.
func endUnit(span trace.Span, u *unit, err error) {
	defer span.End()
	if u == nil {
		tracing.Fail(span, err)
		return
	}
	if u.piped > 0 {
		span.SetAttributes(tracing.PipelineSize.Int(u.piped), tracing.DBBatchSize.Int(u.piped))
	}
	errs := 0
	var first error
	for _, it := range u.items {
		if it.res.Err != nil && !it.retry {
			errs++
			if first == nil {
				first = it.res.Err
			}
		}
	}
	span.SetAttributes(tracing.Errors.Int(errs))
	if first != nil {
		tracing.Fail(span, first)
	}
}

// scriptsOf names the scripts of items, distinct, sorted and comma-joined.
func scriptsOf(items []*item) string {
	var names tracing.Names
	for _, it := range items {
		if it.script != nil {
			names.Add(it.script.Name)
		}
	}
	return names.String()
}
