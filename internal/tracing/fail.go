package tracing

import (
	"errors"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-rl/sluice/limit"
)

// Fail marks span as failed by err, the first error of its batch or unit:
// the span's status, and error.type "unavailable" when the store could
// not answer (limit.ErrUnavailable: a timeout, a refused connection, an
// open breaker), so that a search tells a dead node from a bug.
func Fail(span trace.Span, err error) {
	if errors.Is(err, limit.ErrUnavailable) {
		span.SetAttributes(ErrorType.String("unavailable"))
	}
	span.SetStatus(codes.Error, err.Error())
}
