package rls

import (
	"math"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluice-rl/sluice/internal/ratelimitheader"
	"github.com/sluice-rl/sluice/limit"
)

// descriptorStatus is the reply of one decided descriptor:
//
//	code                  OK when r.Allowed (shadow and open fallbacks included), else OVER_LIMIT
//	current_limit         the policy's rate (see currentLimit)
//	limit_remaining       whole tokens left (after a refund, for a refused request)
//	duration_until_reset  until the bucket or window is whole again, ms precision
func descriptorStatus(p *limit.Policy, r *limit.Result) *rlsv3.RateLimitResponse_DescriptorStatus {
	code := rlsv3.RateLimitResponse_OVER_LIMIT
	if r.Allowed {
		code = rlsv3.RateLimitResponse_OK
	}
	return &rlsv3.RateLimitResponse_DescriptorStatus{
		Code:               code,
		CurrentLimit:       currentLimit(p),
		LimitRemaining:     clampU32(r.Remaining),
		DurationUntilReset: durationpb.New(time.Duration(max(0, r.ResetAfterMs)) * time.Millisecond),
	}
}

// The statuses of descriptors that no rule limits, as envoyproxy/ratelimit
// writes them: OK with nothing else when no rule matches, OK with all of
// uint32 remaining for an unlimited rule.
func unmatchedStatus() *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
}

func unlimitedStatus() *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
}

// units are Envoy's fixed-length units, longest first. MONTH and YEAR have
// no fixed length, so a sluice period is never shown in them.
var units = [...]struct {
	secs int64
	unit rlsv3.RateLimitResponse_RateLimit_Unit
}{
	{7 * 86400, rlsv3.RateLimitResponse_RateLimit_WEEK},
	{86400, rlsv3.RateLimitResponse_RateLimit_DAY},
	{3600, rlsv3.RateLimitResponse_RateLimit_HOUR},
	{60, rlsv3.RateLimitResponse_RateLimit_MINUTE},
	{1, rlsv3.RateLimitResponse_RateLimit_SECOND},
}

// currentLimit shows the policy as Envoy's requests_per_unit per
// unit_multiplier × unit: the window algorithms' limit per period, the
// bucket algorithms' rate per period. The unit is the longest of WEEK, DAY,
// HOUR, MINUTE and SECOND that divides the period; unit_multiplier is set
// when the period is several of it (5m is 1 × 5 MINUTE). A period that is
// no whole number of seconds is scaled, with the count, to the shortest
// whole number of seconds, so the rate stays exact: 3 per 700ms is 30 per
// 7 × SECOND. Counts past uint32 are shown as its maximum.
func currentLimit(p *limit.Policy) *rlsv3.RateLimitResponse_RateLimit {
	n := p.Rate
	if !p.Algorithm.IsBucket() {
		n = p.Limit
	}
	rpu, unit, mult := perUnit(n, p.Period)
	rl := &rlsv3.RateLimitResponse_RateLimit{Name: p.Name, RequestsPerUnit: rpu, Unit: unit}
	if mult > 1 {
		rl.UnitMultiplier = wrapperspb.UInt32(mult)
	}
	return rl
}

// perUnit writes n per period as requests per mult × unit.
func perUnit(n int64, period time.Duration) (uint32, rlsv3.RateLimitResponse_RateLimit_Unit, uint32) {
	ns := int64(period)
	if ns <= 0 || n <= 0 {
		return clampU32(n), rlsv3.RateLimitResponse_RateLimit_UNKNOWN, 0
	}
	g := gcd(ns, int64(time.Second))
	scale := int64(time.Second) / g // 1 when the period is whole seconds
	secs := ns / g                  // the period × scale, in seconds
	count := int64(math.MaxUint32)
	if n <= math.MaxUint32/scale {
		count = n * scale
	}
	u := units[len(units)-1] // SECOND divides every whole number of seconds
	for _, v := range units {
		if secs%v.secs == 0 {
			u = v
			break
		}
	}
	return clampU32(count), u.unit, clampU32(secs / u.secs)
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func clampU32(n int64) uint32 {
	return uint32(min(max(n, 0), math.MaxUint32))
}

// rateLimitHeaders are the RateLimit-Policy and RateLimit response headers
// of draft-ietf-httpapi-ratelimit-headers for the descriptor that binds:
// the first refused one, else the one with the fewest tokens left; and
// Retry-After when that one is refused and a retry can pass. They are the
// HTTP door's, from the same functions (ratelimitheader), so a client
// behind Envoy reads what a client of the HTTP door reads:
//
//	RateLimit-Policy: "<name>";q=<limit>;w=<window seconds>
//	RateLimit: "<name>";r=<remaining>;t=<seconds>
//	Retry-After: <seconds>
//
// q is the policy's limit (the burst of a bucket); w is a window's period,
// or the time a bucket takes to refill from empty, in whole seconds
// rounded up. t is ratelimitheader.Reset: when refused, the seconds until
// the request could pass (retry_after, and Retry-After says the same),
// else until the bucket or window is whole again; rounded up. A refused
// request that can never pass (cost over the limit) shows t as the reset,
// and no Retry-After. Nothing is written when no descriptor was decided.
func rateLimitHeaders(ps []*limit.Policy, rs []limit.Result) []*corev3.HeaderValue {
	best := -1
	for i := range rs {
		if ps[i] == nil {
			continue
		}
		if !rs[i].Allowed {
			best = i
			break
		}
		if best < 0 || rs[i].Remaining < rs[best].Remaining {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	p, r := ps[best], &rs[best]
	policyValue, state := ratelimitheader.Values(p, r)
	h := []*corev3.HeaderValue{{Key: "RateLimit-Policy", Value: policyValue}, {Key: "RateLimit", Value: state}}
	if secs, ok := ratelimitheader.RetryAfter(r); ok {
		h = append(h, &corev3.HeaderValue{Key: "Retry-After", Value: strconv.FormatInt(secs, 10)})
	}
	return h
}
