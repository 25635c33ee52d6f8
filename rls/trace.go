package rls

import (
	"context"
	"strings"

	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/tracing"
)

// startSpan starts the server span of a call to method ("/pkg.Service/Method"),
// a child of the call's traceparent metadata when it has a valid one,
// else a root (sampled by the sampler; a parent's sampled flag is followed).
func (s *Server) startSpan(ctx context.Context, method string) (context.Context, trace.Span) {
	ctx = tracing.FromGRPC(ctx)
	name := strings.TrimPrefix(method, "/")
	svc, m, _ := strings.Cut(name, "/")
	return s.cfg.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.RPCSystem.String("grpc"), tracing.RPCService.String(svc), tracing.RPCMethod.String(m), tracing.Door.String("grpc")))
}

// endSpan ends a call's span with its gRPC status. As OTel's gRPC
// conventions say for a server, the codes a client causes (a bad
// descriptor, no credentials) leave the span's status unset; the
// server's own (Internal, Unavailable, …) mark it an error.
func endSpan(span trace.Span, err error) {
	code := status.Code(err)
	span.SetAttributes(tracing.GRPCStatus.Int(int(code)))
	switch code {
	case codes.Unknown, codes.DeadlineExceeded, codes.Unimplemented, codes.Internal, codes.Unavailable, codes.DataLoss:
		span.SetStatus(otelcodes.Error, status.Convert(err).Message())
	}
	span.End()
}

// linkJoined notes, on the span of a call in ctx whose requests went in
// the batch another call leads (leader, that call's context), that the
// batch's sluice.decide span is under the leader's call: a link to it,
// so that a trace viewer gets from this call to its decisions.
func linkJoined(ctx, leader context.Context) {
	sp := tracing.Recording(ctx)
	if sp == nil {
		return
	}
	sp.SetAttributes(tracing.Joined.Bool(true))
	sp.AddLink(trace.Link{SpanContext: trace.SpanContextFromContext(leader)})
}
