// Package rls is Envoy's rate-limit service (envoy.service.ratelimit.v3,
// ShouldRateLimit) over gRPC: a thin door onto the same limiter as RESP.
//
// Each descriptor of a request becomes one sluice key (envoycfg.Key), whose
// policy a Matcher finds; the limited descriptors of one request are
// decided all-or-nothing by the limiter's MTake, so a request refused by
// one rule spends nothing on the others. The package validates requests,
// maps them and writes the reply; it must not decide anything itself, nor
// know of Redis: store failures, shadow mode and the hot-key paths are the
// limiter's.
package rls
