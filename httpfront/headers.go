package httpfront

import (
	"net/http"
	"strconv"

	"github.com/sluice-rl/sluice/internal/ratelimitheader"
	"github.com/sluice-rl/sluice/limit"
)

// decisionHeaders adds the headers of a decision, in the form of
// draft-ietf-httpapi-ratelimit-headers (structured fields):
//
//	RateLimit-Policy: "name";q=<limit>;w=<window in seconds>
//	RateLimit:        "name";r=<remaining>;t=<seconds until full, rounded up>
//	Retry-After:      <seconds, rounded up>   (rejected, and a retry can succeed)
//
// and with legacy the X-RateLimit-Limit, -Remaining and -Reset (seconds
// until full, rounded up: a delta, not a Unix time). p nil (a Decider that
// does not name the policy) leaves out the two RateLimit headers.
func decisionHeaders(h http.Header, p *limit.Policy, r *limit.Result, legacy bool) {
	reset := ratelimitheader.CeilSeconds(r.ResetAfterMs)
	if p != nil {
		policy, state := ratelimitheader.Values(p, r, r.ResetAfterMs)
		h.Set("RateLimit-Policy", policy)
		h.Set("RateLimit", state)
	}
	if !r.Allowed && r.RetryAfterMs > 0 {
		h.Set("Retry-After", strconv.FormatInt(ratelimitheader.CeilSeconds(r.RetryAfterMs), 10))
	}
	if legacy {
		h.Set("X-RateLimit-Limit", strconv.FormatInt(r.Limit, 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(r.Remaining, 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
	}
}
