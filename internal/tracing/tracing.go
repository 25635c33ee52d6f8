package tracing

import (
	"context"
	"net"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
)

// Scope is the instrumentation scope of every sluice span.
const Scope = "github.com/sluice-rl/sluice"

// Span names.
const (
	// SpanDecide is one batch a door hands the limiter (Limiter.Decide).
	SpanDecide = "sluice.decide"
	// SpanStore is one node's part of a store round trip: the items of
	// one Decide that went to one Redis node (cluster's unit).
	SpanStore = "sluice.store"
	// SpanGRPC is the gRPC door's server span (OTel's {rpc.service}/{rpc.method}).
	SpanGRPC = "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
)

// Attribute keys of sluice's own; the others are OTel semantic conventions.
const (
	Door         = attribute.Key("sluice.door")           // resp, http or grpc
	BatchSize    = attribute.Key("sluice.batch.size")     // requests in the batch (decide) or the unit (store)
	Policy       = attribute.Key("sluice.policy")         // the batch's policy; several: sorted, comma-joined
	DecidedBy    = attribute.Key("sluice.decided_by")     // likewise, of the decisions
	Allowed      = attribute.Key("sluice.allowed")        // decisions admitted
	Rejected     = attribute.Key("sluice.rejected")       // decisions refused
	Errors       = attribute.Key("sluice.errors")         // requests answered by an error
	Index        = attribute.Key("sluice.index")          // a decision event's request, from 0
	Admitted     = attribute.Key("sluice.admitted")       // a decision event's outcome (bool)
	Remaining    = attribute.Key("sluice.remaining")      // a decision event's remaining
	RetryAfterMs = attribute.Key("sluice.retry_after_ms") // a decision event's retry_after_ms
	Script       = attribute.Key("sluice.script")         // the Lua scripts of a store unit, comma-joined
	PipelineSize = attribute.Key("sluice.pipeline.size")  // requests in the node pipeline the unit rode in
	Joined       = attribute.Key("sluice.joined")         // a gRPC call decided in another call's batch
	Command      = attribute.Key("sluice.command")        // rl.mtake on its decide span (all-or-nothing)

	DBSystem     = attribute.Key("db.system.name")
	DBOperation  = attribute.Key("db.operation.name")
	DBBatchSize  = attribute.Key("db.operation.batch.size")
	ServerAddr   = attribute.Key("server.address")
	ServerPort   = attribute.Key("server.port")
	RPCSystem    = attribute.Key("rpc.system")
	RPCService   = attribute.Key("rpc.service")
	RPCMethod    = attribute.Key("rpc.method")
	GRPCStatus   = attribute.Key("rpc.grpc.status_code")
	HTTPMethod   = attribute.Key("http.request.method")
	HTTPRoute    = attribute.Key("http.route")
	HTTPStatus   = attribute.Key("http.response.status_code")
	URLPath      = attribute.Key("url.path")
	ErrorType    = attribute.Key("error.type")
	ClientAddr   = attribute.Key("client.address")
	NetworkProto = attribute.Key("network.protocol.name")
)

// EventDecision is the event a decide span carries per request, for the
// first MaxEvents requests of its batch.
const EventDecision = "sluice.decision"

// MaxEvents bounds the decision events of one decide span: a pipeline of
// 10,000 commands gets its counts, not 10,000 events.
const MaxEvents = 32

// Propagator is W3C Trace Context (traceparent, tracestate): what the HTTP
// and gRPC doors continue.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// ServerAddress is server.address and server.port of a host:port, for
// the store's spans; a port that is not a number is left out.
func ServerAddress(addr string) []attribute.KeyValue {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return []attribute.KeyValue{ServerAddr.String(addr)}
	}
	kv := []attribute.KeyValue{ServerAddr.String(host)}
	if p, err := strconv.Atoi(port); err == nil {
		kv = append(kv, ServerPort.Int(p))
	}
	return kv
}

// MetadataCarrier adapts incoming gRPC metadata to the propagator.
type MetadataCarrier metadata.MD

var _ propagation.TextMapCarrier = MetadataCarrier(nil)

// Get returns the first value of key.
func (c MetadataCarrier) Get(key string) string {
	if vs := metadata.MD(c).Get(key); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// Set sets key to value.
func (c MetadataCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

// Keys lists the keys.
func (c MetadataCarrier) Keys() []string {
	ks := make([]string, 0, len(c))
	for k := range c {
		ks = append(ks, k)
	}
	return ks
}

// FromGRPC is ctx with the remote span context of the call's
// traceparent metadata, when it has a valid one.
func FromGRPC(ctx context.Context) context.Context {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return ctx
	}
	return Propagator.Extract(ctx, MetadataCarrier(md))
}

// Recording is the span of ctx when it records, else nil: what the
// store asks before it starts children of its own.
func Recording(ctx context.Context) trace.Span {
	if sp := trace.SpanFromContext(ctx); sp.IsRecording() {
		return sp
	}
	return nil
}
