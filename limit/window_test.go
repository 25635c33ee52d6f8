package limit

import (
	"strings"
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	day := 24 * time.Hour
	for _, tc := range []struct {
		alg          Algorithm
		limit        int64
		period       time.Duration
		ticks, tick  int64
		wantErrSubst string
	}{
		{FixedWindow, 100, time.Second, 1_000_000, 1, ""},
		{FixedWindow, 1 << 40, day, 86_400_000_000, 1, ""}, // no products: µs always
		{SlidingWindow, 100, time.Second, 1_000_000, 1, ""},
		{SlidingWindow, 10_000_000, time.Second, 1_000_000, 1, ""},
		{SlidingWindow, 26_000, day, 86_400_000_000, 1, ""},
		{SlidingWindow, 27_000, day, 86_400_000, 1000, ""},
		{SlidingWindow, 26_000_000, day, 86_400_000, 1000, ""},
		{SlidingWindow, 27_000_000, day, 86_400, 1_000_000, ""},
		{SlidingWindow, 1 << 42, 1001 * time.Microsecond, 0, 0, "53 bits"},
		{SlidingWindow, MaxScaled / 2, time.Second, 0, 0, "too large"},
		{FixedWindow, 0, time.Second, 0, 0, "at least 1"},
		{FixedWindow, 1, time.Nanosecond, 0, 0, "microseconds"},
		{FixedWindow, 1, 400 * day, 0, 0, "366 days"},
	} {
		p := &Policy{Algorithm: tc.alg, Limit: tc.limit, Period: tc.period}
		w, err := p.Window()
		if tc.wantErrSubst != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrSubst) {
				t.Errorf("%s %d/%s: err %v, want %q", tc.alg, tc.limit, tc.period, err, tc.wantErrSubst)
			}
			continue
		}
		if err != nil || w.Ticks != tc.ticks || w.Tick != tc.tick || w.Limit != tc.limit || w.Length() != int64(tc.period/time.Microsecond) {
			t.Errorf("%s %d/%s: %+v %v, want ticks %d of %dµs", tc.alg, tc.limit, tc.period, w, err, tc.ticks, tc.tick)
		}
		if tc.alg == SlidingWindow && 3*w.Limit*w.Ticks >= MaxScaled {
			t.Errorf("%s %d/%s: 3 × limit × ticks passes 2^53", tc.alg, tc.limit, tc.period)
		}
	}
}
