package httpfront

import (
	"net/http"
	"strconv"

	"github.com/sluice-rl/sluice/internal/ratelimitheader"
	"github.com/sluice-rl/sluice/limit"
)

// decisionHeaders adds the headers of a decision, in the form of
// draft-ietf-httpapi-ratelimit-headers-11 (structured fields), as the gRPC
// door writes them (ratelimitheader: one meaning of t in both):
//
//	RateLimit-Policy: "name";q=<limit>;w=<window in seconds>
//	RateLimit:        "name";r=<remaining>;t=<seconds, rounded up: until a refused request can pass, else until full>
//	Retry-After:      <seconds, rounded up, = t>   (rejected, and a retry can succeed)
//
// and with legacy the X-RateLimit-Limit, -Remaining and -Reset (seconds
// until full, rounded up: a delta, not a Unix time; what Envoy's
// x-ratelimit-reset says from the gRPC door's duration_until_reset). p nil
// (a Decider that does not name the policy) leaves out the two RateLimit
// headers.
func decisionHeaders(h http.Header, p *limit.Policy, r *limit.Result, legacy bool) {
	if p != nil {
		policyValue, state := ratelimitheader.Values(p, r)
		h.Set("RateLimit-Policy", policyValue)
		h.Set("RateLimit", state)
	}
	if secs, ok := ratelimitheader.RetryAfter(r); ok {
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	if legacy {
		h.Set("X-RateLimit-Limit", strconv.FormatInt(r.Limit, 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(r.Remaining, 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(ratelimitheader.CeilSeconds(r.ResetAfterMs), 10))
	}
}
