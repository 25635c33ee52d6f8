package layercheck

import (
	"testing"
	"time"
)

// Give-backs raise the bound only when valid (applied, naming the receipt
// of an admitted take of the key, once, at most its cost), and only where
// they may have been applied: a second burst is covered by the give-backs
// inside it, not by one long before it, nor in another window. An applied
// give-back the contract refuses is a receipt violation of its own.
func TestCheckGiveBacks(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tb := Variant{Name: "tb", Algorithm: "token_bucket", Limit: 3, Rate: 1, Period: time.Hour}
	fw := Variant{Name: "fw", Algorithm: "fixed_window", Limit: 2, Period: time.Second}
	one := func(ms int, cost int64) Admission { return Admission{Sent: at(ms), Recv: at(ms + 5), Cost: cost} }
	back := func(ms int, delta int64, receipt string, applied bool) GiveBack {
		return GiveBack{Sent: at(ms), Recv: at(ms + 5), Delta: delta, Receipt: receipt, Applied: applied, By: "store", Who: "owner", User: "owner"}
	}
	r3 := map[string]Taken{"r3": {3, "owner", "owner"}} // the first take's receipt, cost 3
	r2 := map[string]Taken{"r2": {2, "owner", "owner"}}
	for _, tt := range []struct {
		name           string
		v              Variant
		adm            []Admission
		receipts       map[string]Taken
		backs          []GiveBack
		bound, receipt int // violations of the bound, of kind receipt
	}{
		{"bucket: a valid give-back admits as many more", tb, []Admission{one(0, 3), one(20, 2)}, r3, []GiveBack{back(10, 2, "r3", true)}, 0, 0},
		{"bucket: not more", tb, []Admission{one(0, 3), one(20, 3)}, r3, []GiveBack{back(10, 2, "r3", true)}, 1, 0},
		{"bucket: at most the take's cost", tb, []Admission{one(0, 3), one(20, 3)}, r2, []GiveBack{back(10, 3, "r2", true)}, 1, 1},
		{"bucket: a give-back before the burst adds nothing", tb, []Admission{one(100, 3), one(120, 2)}, r3, []GiveBack{back(0, 2, "r3", true)}, 1, 0},
		{"bucket: no receipt earns nothing", tb, []Admission{one(0, 3), one(20, 2)}, r3, []GiveBack{back(10, 2, "", true)}, 1, 1},
		{"bucket: a receipt of no take here earns nothing", tb, []Admission{one(0, 3), one(20, 2)}, r3, []GiveBack{back(10, 2, "forged", true)}, 1, 1},
		{"bucket: once", tb, []Admission{one(0, 3), one(20, 1), one(40, 1), one(60, 1)}, r3,
			[]GiveBack{back(10, 1, "r3", true), back(30, 1, "r3", true), back(50, 1, "r3", true)}, 1, 2},
		{"bucket: a receipt is its user's", tb, []Admission{one(0, 3), one(20, 2)}, map[string]Taken{"r3": {3, "rival", "rival"}}, []GiveBack{back(10, 2, "r3", true)}, 1, 1},
		{"bucket: without users everyone is default", tb, []Admission{one(0, 3), one(20, 2)}, map[string]Taken{"r3": {3, "rival", "owner"}}, []GiveBack{back(10, 2, "r3", true)}, 0, 0},
		{"bucket: a refused give-back is no violation, and no credit", tb, []Admission{one(0, 3), one(20, 2)}, r3, []GiveBack{back(10, 2, "forged", false)}, 1, 0},
		{"window: the give-back's own window", fw, []Admission{one(0, 2), one(20, 1)}, map[string]Taken{"w": {2, "owner", "owner"}}, []GiveBack{back(10, 1, "w", true)}, 0, 0},
		{"window: not the next one", fw, []Admission{one(1000, 2), one(1020, 1)}, map[string]Taken{"w": {2, "owner", "owner"}}, []GiveBack{back(10, 1, "w", true)}, 1, 0},
	} {
		k := &KeyLog{Key: "k", Policy: tt.v.Name, Adm: tt.adm, Receipts: tt.receipts, Backs: tt.backs}
		res := Check(k, []Span{{V: tt.v, From: t0.Add(-time.Hour)}}, Slack{}, nil)
		bound, receipt := 0, 0
		for _, v := range res.Violations {
			if v.Kind == "receipt" {
				receipt++
			} else {
				bound++
			}
		}
		if bound != tt.bound || receipt != tt.receipt {
			t.Errorf("%s: %d bound and %d receipt violations %v, want %d and %d", tt.name, bound, receipt, res.Violations, tt.bound, tt.receipt)
		}
	}
}
