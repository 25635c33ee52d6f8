// Package tracing holds what the doors, the limiter and the store share
// about OpenTelemetry traces: the span names and attribute keys
// (docs/tracing.md lists them; a change there is a change to what users
// query in Jaeger or Tempo), the W3C trace-context propagator, and the
// carriers of HTTP headers and gRPC metadata. It imports only the OTel
// API, never the SDK: which exporter runs is app's choice.
//
// Tracing is off when a component's trace.Tracer is nil; every caller
// checks that before it touches a context or a clock, so the decision
// path costs, with tracing off, what it cost before tracing existed.
package tracing
