// Package ratelimitheader writes the RateLimit-Policy and RateLimit header
// values of draft-ietf-httpapi-ratelimit-headers (structured fields) for a
// policy and a decision, for every door that sends them (HTTP, and Envoy's
// rate-limit service, which passes them on to the client):
//
//	RateLimit-Policy: "name";q=<limit>;w=<window in seconds>
//	RateLimit:        "name";r=<remaining>;t=<seconds, rounded up>
package ratelimitheader

import (
	"math"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/limit"
)

// maxSFInteger is the largest integer a structured field holds (RFC 8941:
// at most 15 digits); larger values are clamped to it.
const maxSFInteger = 999_999_999_999_999

// Values are the two header values of policy p after decision r; tMs is
// the t the caller reports, in ms (the reset, or the retry of a refused
// request), rounded up to whole seconds.
func Values(p *limit.Policy, r *limit.Result, tMs int64) (policy, state string) {
	name := sfString(p.Name)
	return name + ";q=" + sfInt(p.Limit) + ";w=" + sfInt(Window(p)),
		name + ";r=" + sfInt(max(0, r.Remaining)) + ";t=" + sfInt(CeilSeconds(tMs))
}

// Window is the w of RateLimit-Policy in whole seconds, at least 1: the
// window of the window algorithms, and for the bucket algorithms the time a
// drained bucket takes to fill again (limit × period / rate), so that q per
// w is the sustained rate and q the burst: a bucket of 100 refilled at
// 50/s says q=100;w=2, not q=100;w=1, which would promise twice its rate.
func Window(p *limit.Policy) int64 {
	secs := p.Period.Seconds()
	if p.Algorithm.IsBucket() && p.Rate > 0 {
		secs = float64(p.Limit) * secs / float64(p.Rate)
	}
	if !(secs < maxSFInteger) { // NaN, Inf or huge
		return maxSFInteger
	}
	return max(1, int64(math.Ceil(secs)))
}

// CeilSeconds is ms in whole seconds, rounded up; 0 for ms <= 0.
func CeilSeconds(ms int64) int64 {
	if ms <= 0 {
		return 0
	}
	return ms/1000 + min(1, ms%1000)
}

// sfInt is n as a structured-field integer, clamped to its range.
func sfInt(n int64) string {
	return strconv.FormatInt(min(max(n, -maxSFInteger), maxSFInteger), 10)
}

// sfString is s as a structured-field string (RFC 8941 §3.3.3): quoted,
// with '"' and '\' escaped; bytes outside printable ASCII, which an
// sf-string cannot hold, become '?'.
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
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
