package ratelimitheader

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

func TestWindowAndRounding(t *testing.T) {
	t.Parallel()
	cases := []struct {
		p    limit.Policy
		want int64
	}{
		{limit.Policy{Limit: 100, Rate: 100, Period: time.Minute}, 60},
		{limit.Policy{Limit: 100, Rate: 50, Period: time.Second}, 2},
		{limit.Policy{Algorithm: limit.GCRA, Limit: 10, Rate: 1000, Period: time.Second}, 1},
		{limit.Policy{Limit: 5, Rate: 1, Period: time.Hour}, 5 * 3600},
		{limit.Policy{Algorithm: limit.FixedWindow, Limit: 5, Period: 1500 * time.Millisecond}, 2},
		{limit.Policy{Algorithm: limit.SlidingWindow, Limit: 1000, Period: 24 * time.Hour}, 86400},
		{limit.Policy{Limit: 1 << 52, Rate: 1, Period: 24 * time.Hour}, maxSFInteger},
	}
	for _, c := range cases {
		if got := Window(&c.p); got != c.want {
			t.Errorf("Window(%s %d %d/%s) = %d, want %d", c.p.Algorithm, c.p.Limit, c.p.Rate, c.p.Period, got, c.want)
		}
	}
	for ms, want := range map[int64]int64{-1: 0, 0: 0, 1: 1, 999: 1, 1000: 1, 1001: 2, 60000: 60} {
		if got := CeilSeconds(ms); got != want {
			t.Errorf("CeilSeconds(%d) = %d, want %d", ms, got, want)
		}
	}
	if got := sfInt(1 << 60); got != "999999999999999" {
		t.Errorf("sfInt(2^60) = %s", got)
	}
	if got := sfString("a\"b\\c\x00é"); got != `"a\"b\\c???"` {
		t.Errorf("sfString = %s", got)
	}
}

func TestValues(t *testing.T) {
	p := &limit.Policy{Name: `a "b"`, Limit: 100, Rate: 50, Period: time.Second}
	pol, state := Values(p, &limit.Result{Allowed: true, Remaining: 42, RetryAfterMs: -1, ResetAfterMs: 1500})
	if pol != `"a \"b\"";q=100;w=2` || state != `"a \"b\"";r=42;t=2` {
		t.Errorf("Values = %s | %s", pol, state)
	}
	if _, state := Values(p, &limit.Result{Remaining: -3, RetryAfterMs: -1}); state != `"a \"b\"";r=0;t=0` {
		t.Errorf("negative remaining: %s", state)
	}
}

// t is the retry of a refusal a retry can pass, and equals its
// Retry-After; else the reset.
func TestResetAndRetryAfter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		r     limit.Result
		t     int64
		retry int64 // -1: no Retry-After
	}{
		{"admitted", limit.Result{Allowed: true, Remaining: 4, RetryAfterMs: -1, ResetAfterMs: 6000}, 6, -1},
		{"admitted, empty", limit.Result{Allowed: true, Remaining: 0, RetryAfterMs: -1, ResetAfterMs: 2001}, 3, -1},
		{"refused, retry", limit.Result{Remaining: 0, RetryAfterMs: 1500, ResetAfterMs: 9200}, 2, 2},
		{"refused, cost over what is left", limit.Result{Remaining: 2, RetryAfterMs: 1, ResetAfterMs: 8000}, 1, 1},
		{"refused for ever", limit.Result{Remaining: 10, RetryAfterMs: -1, ResetAfterMs: 0}, 0, -1},
		{"refused for ever, bucket not full", limit.Result{Remaining: 3, RetryAfterMs: -1, ResetAfterMs: 1750}, 2, -1},
	}
	for _, c := range cases {
		retry, ok := RetryAfter(&c.r)
		if !ok {
			retry = -1
		}
		if got := Reset(&c.r); got != c.t || retry != c.retry {
			t.Errorf("%s: t %d, Retry-After %d; want %d, %d", c.name, got, retry, c.t, c.retry)
		}
	}
}

func TestSFString(t *testing.T) {
	for in, want := range map[string]string{"api": `"api"`, `a"b\c`: `"a\"b\\c"`, "é\n": `"???"`} {
		if got := sfString(in); got != want {
			t.Errorf("sfString(%q) = %s, want %s", in, got, want)
		}
	}
}
