package layercheck

import (
	"testing"
	"time"
)

// Give-backs raise the bound by what they gave, only where they may have
// been applied: a second burst is covered by the give-backs inside it, not
// by one long before it, nor in another window.
func TestCheckGiveBacks(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tb := Variant{Name: "tb", Algorithm: "token_bucket", Limit: 3, Rate: 1, Period: time.Hour}
	fw := Variant{Name: "fw", Algorithm: "fixed_window", Limit: 2, Period: time.Second}
	one := func(ms int, cost int64) Admission { return Admission{Sent: at(ms), Recv: at(ms + 5), Cost: cost} }
	for _, tt := range []struct {
		name string
		v    Variant
		adm  []Admission
		back []Admission
		want int
	}{
		{"bucket: a give-back admits as many more", tb, []Admission{one(0, 3), one(20, 2)}, []Admission{one(10, 2)}, 0},
		{"bucket: not more", tb, []Admission{one(0, 3), one(20, 3)}, []Admission{one(10, 2)}, 1},
		{"bucket: a give-back before the burst adds nothing", tb, []Admission{one(100, 3), one(120, 2)}, []Admission{one(0, 2)}, 1},
		{"window: the give-back's own window", fw, []Admission{one(0, 2), one(20, 1)}, []Admission{one(10, 1)}, 0},
		{"window: not the next one", fw, []Admission{one(1000, 2), one(1020, 1)}, []Admission{one(10, 1)}, 1},
	} {
		k := &KeyLog{Key: "k", Policy: tt.v.Name, Adm: tt.adm, Back: tt.back}
		res := Check(k, []Span{{V: tt.v, From: t0.Add(-time.Hour)}}, Slack{})
		if len(res.Violations) != tt.want {
			t.Errorf("%s: %d violations %v, want %d", tt.name, len(res.Violations), res.Violations, tt.want)
		}
	}
}
