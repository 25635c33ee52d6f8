package layercheck

import (
	"testing"
	"time"
)

// Check on hand-made logs: a bucket that keeps its bound passes, one that
// admits a second burst fails, and timing slack never makes a violation.
func TestCheck(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tb := Variant{Name: "tb", Algorithm: "token_bucket", Limit: 3, Rate: 1, Period: time.Second}
	fw := Variant{Name: "fw", Algorithm: "fixed_window", Limit: 2, Period: time.Second}
	adm := func(ms ...int) []Admission {
		var out []Admission
		for _, m := range ms {
			out = append(out, Admission{Sent: at(m), Recv: at(m + 5), Cost: 1})
		}
		return out
	}
	for _, tt := range []struct {
		name  string
		v     Variant
		adm   []Admission
		reset []Interval
		want  int
	}{
		{"burst then rate", tb, adm(0, 1, 2, 1000, 2000), nil, 0},
		{"second burst", tb, adm(0, 1, 2, 100, 101), nil, 1},
		{"second burst after a reset", tb, adm(0, 1, 2, 200, 201, 202), []Interval{{at(100), at(110)}}, 0},
		{"window", fw, adm(0, 10, 1000, 1010), nil, 0},
		{"window over", fw, adm(0, 10, 20), nil, 1},
		{"window straddling its end is not counted", fw, adm(0, 10, 996), nil, 0},
	} {
		k := &KeyLog{Key: "k", Policy: tt.v.Name, Adm: tt.adm, Resets: tt.reset}
		res := Check(k, []Span{{V: tt.v, From: t0.Add(-time.Hour)}}, Slack{}, nil)
		if len(res.Violations) != tt.want {
			t.Errorf("%s: %d violations %v, want %d", tt.name, len(res.Violations), res.Violations, tt.want)
		}
	}
	// A limit raised at 500 ms: the interval across it is bounded by the
	// larger policy.
	big := tb
	big.Limit = 6
	tr := NewTracker(t0.Add(-time.Hour), tb)
	tr.Close(tb, at(600))
	tr.Open(big, at(500))
	k := &KeyLog{Key: "k", Policy: "tb", Adm: adm(0, 1, 2, 700, 701, 702)}
	if res := Check(k, tr.Spans("tb"), Slack{}, nil); len(res.Violations) != 0 {
		t.Errorf("across a raised limit: %v", res.Violations)
	}
}

// A calendar window counts in the zone's day: admissions either side of
// Kolkata's midnight are two windows, three inside one Kolkata day (across
// UTC's midnight) are one over.
func TestCheckCalendar(t *testing.T) {
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	cd := Variant{Name: "cd", Algorithm: "fixed_window", Limit: 2, Period: 24 * time.Hour, Calendar: "day", Zone: kolkata}
	midnight := time.Date(2024, 5, 2, 0, 0, 0, 0, kolkata)
	utcMidnight := time.Date(2024, 5, 2, 0, 0, 0, 0, time.UTC)
	adm := func(ts ...time.Time) []Admission {
		var out []Admission
		for _, x := range ts {
			out = append(out, Admission{Sent: x, Recv: x.Add(5 * time.Millisecond), Cost: 1})
		}
		return out
	}
	for _, tt := range []struct {
		name string
		adm  []Admission
		want int
	}{
		{"either side of Kolkata's midnight", adm(midnight.Add(-time.Second), midnight.Add(-time.Second), midnight, midnight), 0},
		{"three in one Kolkata day", adm(utcMidnight.Add(-time.Second), utcMidnight, utcMidnight.Add(time.Second)), 1},
	} {
		k := &KeyLog{Key: "k", Policy: "cd", Adm: tt.adm}
		res := Check(k, []Span{{V: cd, From: midnight.Add(-48 * time.Hour)}}, Slack{}, nil)
		if len(res.Violations) != tt.want {
			t.Errorf("%s: %d violations %v, want %d", tt.name, len(res.Violations), res.Violations, tt.want)
		}
	}
}
