package httpfront

import (
	"net"
	"net/http"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-rl/sluice/internal/tracing"
)

// routes are the paths the door serves: a span is named by its route,
// and a path the door does not serve by the method alone, so a scan of
// random paths cannot make span names without bound (OTel's HTTP
// conventions).
var routes = map[string]bool{"/v1/take": true, "/v1/check": true, "/v1/adjust": true, "/v1/acquire": true, "/v1/release": true}

// serveTraced is ServeHTTP with a server span: "POST /v1/take", a child
// of the request's traceparent when it has a valid one, else a root
// (sampled by the sampler; a parent's sampled flag is followed).
func (s *Server) serveTraced(w http.ResponseWriter, r *http.Request) {
	ctx := tracing.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	name := r.Method
	route := routes[r.URL.Path]
	if route {
		name += " " + r.URL.Path
	}
	ctx, span := s.cfg.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(tracing.HTTPMethod.String(r.Method), tracing.URLPath.String(r.URL.Path), tracing.Door.String("http"))
		if route {
			span.SetAttributes(tracing.HTTPRoute.String(r.URL.Path))
		}
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			span.SetAttributes(tracing.ClientAddr.String(host))
		}
	}
	r = r.WithContext(ctx)
	a := s.route(w, r)
	span.SetAttributes(tracing.HTTPStatus.Int(a.status))
	if a.status >= 500 { // a 429 or a client's mistake is no error of the server's (OTel)
		span.SetStatus(codes.Error, http.StatusText(a.status))
	}
	write(w, r, a)
}
