package limit

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPool(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	for _, tc := range []struct {
		limit, rate    int64
		period         time.Duration
		tokenUs, ttlMs int64
		wantErrSubst   string
	}{
		{10, 5, time.Second, 200_000, 10_000, ""},
		{3, 7, time.Second, 142_858, 10_000, ""}, // 142,857.14 rounded up
		{10, 10_000_000, time.Second, 1, 10_000, ""},
		{math.MaxInt64 / 2, math.MaxInt64, time.Microsecond, 0, 0, "53 bits"},
		{1, math.MaxInt64, time.Microsecond, 1, 10_000, ""},
		{1000, 1000, day, 86_400_000, 86_401_000, ""},
		{2, 1, time.Hour, 3_600_000_000, 7_201_000, ""},
		{20, 1, time.Second, 1_000_000, 21_000, ""},
		{1 << 52, 1_000_000, time.Second, 1, 4_503_599_628_371, ""},
		{MaxScaled - 1, 1, time.Microsecond, 1, (MaxScaled-1+999)/1000 + 1000, ""},
		{MaxScaled, 1, time.Microsecond, 0, 0, "53 bits"},
		{2_500_000, 1, time.Hour, 3_600_000_000, 9_000_000_001_000, ""},
		{2_502_000, 1, time.Hour, 0, 0, "53 bits"},
		{1, 1, 9_223_372_036_854_775 * time.Microsecond, 0, 0, "53 bits"},
		{0, 1, time.Second, 0, 0, "limit must be at least 1"},
		{1, 0, time.Second, 0, 0, "rate must be at least 1"},
		{1, 1, time.Nanosecond, 0, 0, "microseconds"},
		{1, 1, 1500 * time.Nanosecond, 0, 0, "microseconds"},
		{1, 1, -time.Second, 0, 0, "microseconds"},
	} {
		p := &Policy{Algorithm: Pool, Limit: tc.limit, Rate: tc.rate, Period: tc.period}
		pp, err := p.Pool()
		if tc.wantErrSubst != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrSubst) {
				t.Errorf("%d per %d/%s: %+v, err %v; want %q", tc.limit, tc.rate, tc.period, pp, err, tc.wantErrSubst)
			}
			continue
		}
		want := PoolParams{Limit: tc.limit, TokenUs: tc.tokenUs, TTLMs: tc.ttlMs}
		if err != nil || pp != want {
			t.Errorf("%d per %d/%s: %+v, err %v; want %+v", tc.limit, tc.rate, tc.period, pp, err, want)
		}
		if err == nil && pp.Limit*pp.TokenUs >= MaxScaled {
			t.Errorf("%d per %d/%s: Limit × TokenUs = %d, not below 2^53", tc.limit, tc.rate, tc.period, pp.Limit*pp.TokenUs)
		}
	}
}

// The pool is internal: no config may name it, and it is not a bucket.
func TestPoolIsInternal(t *testing.T) {
	t.Parallel()
	if slices.Contains(Algorithms, Pool) {
		t.Errorf("Algorithms = %v: holds %q", Algorithms, Pool)
	}
	if Pool.IsBucket() {
		t.Errorf("Pool.IsBucket() = true")
	}
}
