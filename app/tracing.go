package app

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-rl/sluice/internal/tracing"
)

// resolveOTLP finishes --otlp-endpoint from the environment, after the
// one rule has taken the flag, else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT:
// else OTEL_EXPORTER_OTLP_ENDPOINT, a base URL that gets /v1/traces (the
// OTel exporter spec). OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none
// turn off what the environment turned on, never a flag given.
func (c *Config) resolveOTLP(given bool, getenv func(string) string) {
	if given {
		return
	}
	if c.OTLPEndpoint == "" {
		if base := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); base != "" {
			c.OTLPEndpoint = strings.TrimRight(base, "/") + "/v1/traces"
		}
	}
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		c.OTLPEndpoint = ""
	}
}

// tracesURL is the URL traces are posted to: endpoint, checked, with
// /v1/traces when it has no path.
func tracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("serve: --otlp-endpoint %q: want an http:// or https:// URL, e.g. http://127.0.0.1:4318", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// startTracing makes the tracer provider of --otlp-endpoint, when set:
// spans are batched and posted by OTLP/HTTP (protobuf) in the background,
// never on the request path; the exporter reads the other standard
// OTEL_EXPORTER_OTLP_* variables (headers, timeout, compression,
// certificates) and the batch processor OTEL_BSP_*. Off, it sets nothing,
// and every component's tracer stays nil.
func (a *App) startTracing() error {
	c := &a.cfg
	if c.OTLPEndpoint == "" {
		return nil
	}
	if c.TraceSampleRatio < 0 || c.TraceSampleRatio > 1 {
		return fmt.Errorf("serve: --trace-sample-ratio %v: want a number from 0 to 1", c.TraceSampleRatio)
	}
	endpoint, err := tracesURL(c.OTLPEndpoint)
	if err != nil {
		return err
	}
	// The SDK reports its errors — mostly a failed export: the collector
	// is down, refuses, or is slow — to OTel's one process-wide handler:
	// into sluice's log, rather than a line on the standard logger.
	log := a.log
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: OpenTelemetry SDK error", "err", err)
	}))
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return fmt.Errorf("serve: --otlp-endpoint: %w", err)
	}
	version := c.Version
	if version == "" {
		version = "unknown"
	}
	// Later sources win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// (read by the SDK) over sluice's own name, so that a deployment can
	// name its instances (sluice-eu) and add k8s.pod.name and the like.
	res, err := resource.New(context.Background(), resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", "sluice"), attribute.String("service.version", version)),
		resource.WithFromEnv())
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES entry is dropped, the rest
		// kept (the SDK's partial resource): said, not fatal.
		a.log.Warn("tracing: resource attributes", "err", err)
	}
	a.tp = sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.TraceSampleRatio))),
	)
	c.tracer = a.tp.Tracer(tracing.Scope, trace.WithInstrumentationVersion(version))
	a.log.Info("tracing on", "endpoint", redactURL(endpoint), "sample_ratio", c.TraceSampleRatio)
	return nil
}

// stopTracing flushes the spans not yet sent, until ctx ends, and stops
// the exporter; it does nothing when tracing is off or already stopped.
func (a *App) stopTracing(ctx context.Context) {
	if a.tp == nil {
		return
	}
	if err := a.tp.Shutdown(ctx); err != nil {
		a.log.Warn("tracing shutdown", "err", err)
	}
	a.tp = nil
}
