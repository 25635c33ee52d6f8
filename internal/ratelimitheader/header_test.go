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
	pol, state := Values(p, &limit.Result{Remaining: 42}, 1500)
	if pol != `"a \"b\"";q=100;w=2` || state != `"a \"b\"";r=42;t=2` {
		t.Errorf("Values = %s | %s", pol, state)
	}
	if _, state := Values(p, &limit.Result{Remaining: -3}, 0); state != `"a \"b\"";r=0;t=0` {
		t.Errorf("negative remaining: %s", state)
	}
}

func TestSFString(t *testing.T) {
	for in, want := range map[string]string{"api": `"api"`, `a"b\c`: `"a\"b\\c"`, "é\n": `"???"`} {
		if got := sfString(in); got != want {
			t.Errorf("sfString(%q) = %s, want %s", in, got, want)
		}
	}
}
