package httpfront

import (
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/limit"
)

// maxSFInteger is the largest integer a structured field holds (RFC 8941:
// at most 15 digits); larger values are clamped to it.
const maxSFInteger = 999_999_999_999_999

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
	reset := ceilSeconds(r.ResetAfterMs)
	if p != nil {
		name := sfString(p.Name)
		h.Set("RateLimit-Policy", name+";q="+sfInt(r.Limit)+";w="+sfInt(window(p)))
		h.Set("RateLimit", name+";r="+sfInt(r.Remaining)+";t="+sfInt(reset))
	}
	if !r.Allowed && r.RetryAfterMs > 0 {
		h.Set("Retry-After", strconv.FormatInt(ceilSeconds(r.RetryAfterMs), 10))
	}
	if legacy {
		h.Set("X-RateLimit-Limit", strconv.FormatInt(r.Limit, 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(r.Remaining, 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
	}
}

// window is the w of RateLimit-Policy in whole seconds, at least 1: the
// window of the window algorithms, and for the bucket algorithms the time a
// drained bucket takes to fill again (limit × period / rate), so that q per
// w is the sustained rate and q the burst: a bucket of 100 refilled at
// 50/s says q=100;w=2, not q=100;w=1, which would promise twice its rate.
func window(p *limit.Policy) int64 {
	secs := p.Period.Seconds()
	if p.Algorithm.IsBucket() && p.Rate > 0 {
		secs = float64(p.Limit) * secs / float64(p.Rate)
	}
	if !(secs < maxSFInteger) { // NaN, Inf or huge
		return maxSFInteger
	}
	return max(1, int64(math.Ceil(secs)))
}

// ceilSeconds is ms in whole seconds, rounded up; 0 for ms <= 0.
func ceilSeconds(ms int64) int64 {
	if ms <= 0 {
		return 0
	}
	return ms/1000 + min(1, ms%1000)
}

// sfInt is n as a structured-field integer, clamped to its range.
func sfInt(n int64) string {
	return strconv.FormatInt(min(max(n, -maxSFInteger), maxSFInteger), 10)
}

// sfString is s as a structured-field string: quoted, with \ and "
// escaped; bytes outside printable ASCII, which an sf-string cannot hold,
// become '?'.
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
