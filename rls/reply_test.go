package rls

import (
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluice-rl/sluice/limit"
)

func TestPerUnit(t *testing.T) {
	const (
		sec  = rlsv3.RateLimitResponse_RateLimit_SECOND
		min  = rlsv3.RateLimitResponse_RateLimit_MINUTE
		hour = rlsv3.RateLimitResponse_RateLimit_HOUR
		day  = rlsv3.RateLimitResponse_RateLimit_DAY
		week = rlsv3.RateLimitResponse_RateLimit_WEEK
	)
	tests := []struct {
		n      int64
		period time.Duration
		rpu    uint32
		unit   rlsv3.RateLimitResponse_RateLimit_Unit
		mult   uint32
	}{
		{10, time.Second, 10, sec, 1},
		{100, time.Minute, 100, min, 1},
		{5, 5 * time.Minute, 5, min, 5},
		{3, 90 * time.Second, 3, sec, 90},
		{1, time.Hour, 1, hour, 1},
		{7, 48 * time.Hour, 7, day, 2},
		{7, 14 * 24 * time.Hour, 7, week, 2},
		{3, 700 * time.Millisecond, 30, sec, 7},
		{1, 500 * time.Millisecond, 2, sec, 1},
		{1, time.Microsecond, 1_000_000, sec, 1},
		{1 << 40, time.Second, 1<<32 - 1, sec, 1},      // clamped
		{1 << 30, time.Millisecond, 1<<32 - 1, sec, 1}, // clamped when scaled
	}
	for _, tt := range tests {
		rpu, unit, mult := perUnit(tt.n, tt.period)
		if rpu != tt.rpu || unit != tt.unit || mult != tt.mult {
			t.Errorf("perUnit(%d, %s) = %d per %d × %s, want %d per %d × %s", tt.n, tt.period, rpu, mult, unit, tt.rpu, tt.mult, tt.unit)
		}
	}
}

func TestCurrentLimit(t *testing.T) {
	bucket := &limit.Policy{Name: "b", Limit: 100, Rate: 50, Period: 5 * time.Minute}
	window := &limit.Policy{Name: "w", Algorithm: limit.FixedWindow, Limit: 100, Rate: 1, Period: time.Minute}
	if got := currentLimit(bucket); got.Name != "b" || got.RequestsPerUnit != 50 || got.Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE || got.UnitMultiplier.GetValue() != 5 {
		t.Errorf("bucket: %v, want b: 50 per 5 × MINUTE", got)
	}
	if got := currentLimit(window); got.RequestsPerUnit != 100 || got.Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE || got.UnitMultiplier != nil {
		t.Errorf("window: %v, want 100 per MINUTE, no multiplier", got)
	}
}

func TestRateLimitHeaders(t *testing.T) {
	win := &limit.Policy{Name: `per "ip"`, Algorithm: limit.FixedWindow, Limit: 100, Period: time.Minute}
	bucket := &limit.Policy{Name: "api", Limit: 10, Rate: 4, Period: time.Second}
	tests := []struct {
		name                string
		ps                  []*limit.Policy
		rs                  []limit.Result
		policy, left, retry string // retry "": no Retry-After
	}{
		{"fewest left", []*limit.Policy{win, nil, bucket}, []limit.Result{
			{Allowed: true, Remaining: 42, ResetAfterMs: 29_001, RetryAfterMs: -1}, {}, {Allowed: true, Remaining: 50, ResetAfterMs: 1, RetryAfterMs: -1}},
			`"per \"ip\"";q=100;w=60`, `"per \"ip\"";r=42;t=30`, ""},
		{"first refused, retry", []*limit.Policy{win, bucket}, []limit.Result{
			{Allowed: true, Remaining: 0, ResetAfterMs: 5000, RetryAfterMs: -1}, {Allowed: false, Remaining: 0, ResetAfterMs: 2500, RetryAfterMs: 250}},
			`"api";q=10;w=3`, `"api";r=0;t=1`, "1"},
		{"never", []*limit.Policy{bucket}, []limit.Result{{Allowed: false, Remaining: 3, ResetAfterMs: 1750, RetryAfterMs: -1}},
			`"api";q=10;w=3`, `"api";r=3;t=2`, ""},
	}
	for _, tt := range tests {
		h := rateLimitHeaders(tt.ps, tt.rs)
		n := 2
		if tt.retry != "" {
			n = 3
		}
		if len(h) != n || h[0].Key != "RateLimit-Policy" || h[0].Value != tt.policy || h[1].Key != "RateLimit" || h[1].Value != tt.left ||
			n == 3 && (h[2].Key != "Retry-After" || h[2].Value != tt.retry) {
			t.Errorf("%s: %v, want RateLimit-Policy: %s, RateLimit: %s, Retry-After: %q", tt.name, h, tt.policy, tt.left, tt.retry)
		}
	}
	if h := rateLimitHeaders([]*limit.Policy{nil}, make([]limit.Result, 1)); h != nil {
		t.Errorf("no limited descriptor: %v, want no headers", h)
	}
}
