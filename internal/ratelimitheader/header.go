// Package ratelimitheader writes the RateLimit-Policy and RateLimit header
// values of draft-ietf-httpapi-ratelimit-headers-11 (structured fields,
// RFC 9651) for a policy and a decision, for every door that sends them
// (HTTP, and Envoy's rate-limit service, which passes them on to the
// client), and reads them back as a client would (parse.go):
//
//	RateLimit-Policy: "name";q=<limit>;w=<window in seconds>
//	RateLimit:        "name";r=<remaining>;t=<seconds, rounded up: Reset>
//	Retry-After:      <seconds, rounded up: RetryAfter>
//
// t means one thing in every door: see Reset. No qu (the quota is counted
// in the costs the caller names, requests by default) and no pk (the key
// is the partition, and the client named it: docs/http.md says why it is
// not echoed). It must not decide anything: the values come from a
// decision made elsewhere.
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

// Values are the two header values of policy p after decision r:
// policyValue for RateLimit-Policy and state for RateLimit, its t being
// Reset(r).
func Values(p *limit.Policy, r *limit.Result) (policyValue, state string) {
	name := sfString(p.Name)
	return name + ";q=" + sfInt(p.Limit) + ";w=" + sfInt(Window(p)),
		name + ";r=" + sfInt(max(0, r.Remaining)) + ";t=" + sfInt(Reset(r))
}

// Reset is the t of the RateLimit field after decision r, in whole
// seconds rounded up: for a refused request that a retry can pass, the
// time until it can (retry_after_ms, the Retry-After of RetryAfter); else
// the time until the bucket or window is whole again (reset_after_ms).
//
// Why: the draft's t is the effective window, "the number of seconds
// within which the client can use no more than the available quota"
// (draft-ietf-httpapi-ratelimit-headers-11, section 4.1.2; -10 called it
// the reset, "until additional quota ... is made available"), and a
// response with both fields SHOULD NOT carry a Retry-After earlier than
// the end of the effective window (section 6), which is what r=0 with t
// until full and Retry-After until the retry would say. For a refusal the
// quota that matters is the cost the client asked for, so t and
// Retry-After name the same moment (as in the draft's example of a
// throttled response, appendix B.1.4). An admitted request has nothing to
// wait for: t then runs until all of q is back, so a client that spends
// no more than r within t is never refused; for a bucket that is
// conservative (tokens also come back within t), which the draft allows
// (section 6: a server MAY lower the values). A request that can never
// pass (cost over the limit) shows the reset too, and has no Retry-After.
func Reset(r *limit.Result) int64 {
	if secs, ok := RetryAfter(r); ok {
		return secs
	}
	return CeilSeconds(r.ResetAfterMs)
}

// RetryAfter is the Retry-After of decision r in whole seconds, rounded
// up, and whether there is one: only a refused request that a retry can
// pass (retry_after_ms > 0) has one.
func RetryAfter(r *limit.Result) (int64, bool) {
	if r.Allowed || r.RetryAfterMs <= 0 {
		return 0, false
	}
	return CeilSeconds(r.RetryAfterMs), true
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
