package layercheck

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The bounds under faults on hand-made histories (docs/reliability.md,
// "Bounds under faults"): within each formula a history passes with an
// excess of the right kind and share; one token over fails; the same
// history without the fault fails where the fault's own allowance was
// needed; a fault on other slots allows nothing; a local fallback past its
// per-instance share fails; durability: replica gets nothing from a kill.
func TestFaultBounds(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// adm makes one admission of cost 1, decided by by on proc, at each
	// ms (in flight 1 ms).
	adm := func(by, proc string, ms ...int) []Admission {
		var out []Admission
		for _, m := range ms {
			out = append(out, Admission{Sent: at(m), Recv: at(m + 1), Cost: 1, By: by, Door: "resp", Proc: proc})
		}
		return out
	}
	// n admissions 10 ms apart from ms.
	n := func(by, proc string, from, count int) []Admission {
		var ms []int
		for i := range count {
			ms = append(ms, from+10*i)
		}
		return adm(by, proc, ms...)
	}
	cat := func(parts ...[]Admission) []Admission { return slices.Concat(parts...) }
	// A bucket of 10, refilled at 1 an hour: over these few seconds the
	// bound is 10 (+ under 0.002), so the figures read whole.
	base := Variant{Name: "p", Algorithm: "token_bucket", Limit: 10, Rate: 1, Period: time.Hour, OnStoreError: "closed", LocalShare: 1, Durability: "none"}
	with := func(mut func(*Variant)) Variant { v := base; mut(&v); return v }
	closed := base
	open := with(func(v *Variant) { v.OnStoreError = "open" })
	localFallback := with(func(v *Variant) { v.OnStoreError = "local"; v.LocalShare = 0.5 })
	quarter := with(func(v *Variant) { v.OnStoreError = "local"; v.LocalShare = 0.25 }) // floor(2.5) = 2 per instance
	tiny := with(func(v *Variant) { v.OnStoreError = "local"; v.LocalShare = 0.05 })    // floor(0.5) → at least 1
	replica := with(func(v *Variant) { v.Durability = "replica" })
	window := with(func(v *Variant) { v.Algorithm = "fixed_window"; v.Limit = 5; v.Rate = 0 })
	localWindow := with(func(v *Variant) {
		v.Algorithm = "fixed_window"
		v.Limit = 4
		v.Rate = 0
		v.OnStoreError = "local"
		v.LocalShare = 0.5
	})
	global := with(func(v *Variant) { v.Global = true; v.Floor = 0.1 }) // floor: max(1, floor(10 × 0.1)) = 1

	fault := func(kind string, from, to int) Fault {
		return Fault{Kind: kind, Target: "127.0.0.1:7000", From: at(from), To: at(to)}
	}
	kill := fault(FaultKill, 1500, 3500)
	kill.HeldBack = at(1000) // lost: store spends in [900, 1600]
	killNow := fault(FaultKill, 1500, 3500)
	killOther := kill
	killOther.Slots = [][2]int{{100, 200}}
	killMine := kill
	killMine.Slots = [][2]int{{0, 50}}
	sluiceKill := Fault{Kind: FaultSluiceKill, Target: "p1", From: at(1000), To: at(1500)}

	// The kill's history: 2 spends long before, 6 in its lost window;
	// then the promoted replica, which has the 2 and misses the 6, may
	// admit 8 (16 in all: 10 + the 6 lost).
	lost6 := cat(adm("store", "p1", 0, 10), n("store", "p1", 1000, 6))

	type ex struct {
		kind          string
		tokens, bound string // num(): at most two decimals
	}
	for _, tt := range []struct {
		name   string
		v      Variant
		slots  []int
		adm    []Admission
		faults []Fault
		want   []string // violation kinds, sorted
		ex     []ex     // excesses, by fault index then kind
	}{
		{"no fault: the limit", closed, nil, n("store", "p1", 0, 10), nil, nil, nil},
		{"no fault: one over", closed, nil, n("store", "p1", 0, 11), nil, []string{"bucket"}, nil},

		// open: its admissions are their own allowance; the store keeps its bound.
		{"open under a freeze", open, nil, cat(n("store", "p1", 0, 10), n("fallback-open", "p1", 200, 5)),
			[]Fault{fault(FaultFreeze, 100, 1100)}, nil, []ex{{FaultFreeze, "5", "25"}}},
		{"open without a fault", open, nil, cat(n("store", "p1", 0, 10), n("fallback-open", "p1", 200, 5)),
			nil, nil, []ex{{ExcessFallback, "5", "25"}}},
		{"open, the store one over", open, nil, cat(n("store", "p1", 0, 11), n("fallback-open", "p1", 200, 5)),
			[]Fault{fault(FaultFreeze, 100, 1100)}, []string{"bucket"}, nil},

		// local: each instance its share, N × share in all.
		{"local under a cut: each instance its share", localFallback, nil,
			cat(n("store", "p1", 0, 10), n("fallback-local", "p1", 200, 5), n("fallback-local", "p2", 200, 5)),
			[]Fault{fault(FaultCut, 100, 1100)}, nil, []ex{{FaultCut, "10", "10"}}},
		{"local without a fault", localFallback, nil,
			cat(n("store", "p1", 0, 10), n("fallback-local", "p1", 200, 5), n("fallback-local", "p2", 200, 5)),
			nil, nil, []ex{{ExcessFallback, "10", "10"}}},
		{"local: one instance one over its share", localFallback, nil,
			cat(n("store", "p1", 0, 10), n("fallback-local", "p1", 200, 6), n("fallback-local", "p2", 200, 4)),
			[]Fault{fault(FaultCut, 100, 1100)}, []string{"local-share"}, nil},
		{"local: overload shares the fallback's bucket", localFallback, nil,
			cat(n("fallback-local", "p1", 200, 3), n("overload-local", "p1", 300, 3)),
			nil, []string{"local-share"}, nil},
		{"local: share rounded down", quarter, nil, n("fallback-local", "p1", 200, 2), nil, nil, nil},
		{"local: share rounded down, one over", quarter, nil, n("fallback-local", "p1", 200, 3), nil, []string{"local-share"}, nil},
		{"local: a share below one token is one", tiny, nil, n("fallback-local", "p1", 200, 1), nil, nil, nil},
		{"local: a share below one token, one over", tiny, nil, n("fallback-local", "p1", 200, 2), nil, []string{"local-share"}, nil},
		{"local window: its share per window", localWindow, nil, cat(n("store", "p1", 0, 4), n("fallback-local", "p1", 200, 2)),
			nil, nil, []ex{{ExcessFallback, "2", "4"}}},
		{"local window: one over its share", localWindow, nil, n("fallback-local", "p1", 200, 3), nil, []string{"local-share"}, nil},

		// closed admits nothing; a fallback must be the policy's.
		{"closed: an admission", closed, nil, cat(n("store", "p1", 0, 3), adm("fallback-closed", "p1", 200)),
			[]Fault{fault(FaultFreeze, 100, 1100)}, []string{"fallback-mode"}, nil},
		{"closed: an overload admission", closed, nil, adm("overload-closed", "p1", 200), nil, []string{"fallback-mode"}, nil},
		{"local: a fallback-open admission", localFallback, nil, adm("fallback-open", "p1", 200), nil, []string{"fallback-mode"}, nil},

		// kill, durability none: the lost spends, once.
		{"kill: the lost spends again", closed, nil, cat(lost6, n("store", "p1", 3600, 8)),
			[]Fault{kill}, nil, []ex{{FaultKill, "6", "6"}}},
		{"kill: fewer than the lost spends again", closed, nil, cat(lost6, n("store", "p1", 3600, 6)),
			[]Fault{kill}, nil, []ex{{FaultKill, "4", "6"}}},
		{"kill: one over the lost spends", closed, nil, cat(lost6, n("store", "p1", 3600, 9)),
			[]Fault{kill}, []string{"bucket"}, nil},
		{"kill: without the fault", closed, nil, cat(lost6, n("store", "p1", 3600, 6)),
			nil, []string{"bucket"}, nil},
		{"kill: not held back, only λ before it", closed, nil, cat(lost6, n("store", "p1", 3600, 6)),
			[]Fault{killNow}, []string{"bucket"}, nil},
		{"kill: not held back, the spends of λ", closed, nil, cat(adm("store", "p1", 0, 10, 20, 30, 40, 50, 60, 70), n("store", "p1", 1450, 2), n("store", "p1", 3600, 2)),
			[]Fault{killNow}, nil, []ex{{FaultKill, "2", "2"}}},
		{"kill: on other slots", closed, []int{5}, cat(lost6, n("store", "p1", 3600, 6)),
			[]Fault{killOther}, []string{"bucket"}, nil},
		{"kill: on the key's slots", closed, []int{5}, cat(lost6, n("store", "p1", 3600, 6)),
			[]Fault{killMine}, nil, []ex{{FaultKill, "4", "6"}}},
		{"kill: durability replica", replica, nil, cat(lost6, n("store", "p1", 3600, 6)),
			[]Fault{kill}, []string{"bucket"}, nil},
		{"kill: a leased spend counts, a fallback's does not", closed, nil,
			cat(adm("store", "p1", 0, 10), n("lease", "p1", 1550, 3), n("fallback-closed", "p1", 1000, 0), n("store", "p1", 3600, 11)),
			[]Fault{kill}, []string{"bucket"}, nil},
		{"kill: a leased spend up to the lease slack after", closed, nil,
			cat(adm("store", "p1", 0, 10, 20, 30, 40, 50, 60), n("lease", "p1", 1550, 3), n("store", "p1", 3600, 3)),
			[]Fault{kill}, nil, []ex{{FaultKill, "3", "3"}}},
		{"kill: a freeze beside it is not the attribution", closed, nil, cat(lost6, n("store", "p1", 3600, 6)),
			[]Fault{fault(FaultFreeze, 1400, 1700), kill}, nil, []ex{{FaultKill, "4", "6"}}},

		{"a sluice kill beside a freeze: the freeze's", localFallback, nil,
			cat(n("store", "p1", 0, 10), n("fallback-local", "p2", 1200, 5)),
			[]Fault{{Kind: FaultSluiceKill, Target: "p1", From: at(900), To: at(1500)}, fault(FaultFreeze, 1100, 1300)}, nil, []ex{{FaultFreeze, "5", "15"}}},
		{"a freeze beside a home-down: a floor's excess is home's", global, nil, n("region", "p1", 0, 11),
			[]Fault{fault(FaultFreeze, 0, 100), {Kind: FaultHomeDown, Target: "home", From: at(50), To: at(1000)}}, nil, []ex{{FaultHomeDown, "1", "1"}}},

		// restart-empty: one limit.
		{"restart-empty: a full bucket again", closed, nil, cat(n("store", "p1", 0, 10), n("store", "p1", 1000, 10)),
			[]Fault{fault(FaultRestartEmpty, 500, 800)}, nil, []ex{{FaultRestartEmpty, "10", "10"}}},
		{"restart-empty: one over", closed, nil, cat(n("store", "p1", 0, 10), n("store", "p1", 1000, 11)),
			[]Fault{fault(FaultRestartEmpty, 500, 800)}, []string{"bucket"}, nil},
		{"restart-empty: without the fault", closed, nil, cat(n("store", "p1", 0, 10), n("store", "p1", 1000, 10)),
			nil, []string{"bucket"}, nil},
		{"restart-empty: long after it healed", closed, nil, cat(n("store", "p1", 5000, 10), n("store", "p1", 6000, 10)),
			[]Fault{fault(FaultRestartEmpty, 500, 800)}, []string{"bucket"}, nil},
		{"restart-empty: a window's limit", window, nil, cat(n("store", "p1", 0, 5), n("store", "p1", 1000, 5)),
			[]Fault{fault(FaultRestartEmpty, 500, 800)}, nil, []ex{{FaultRestartEmpty, "5", "5"}}},
		{"restart-empty: a window one over", window, nil, cat(n("store", "p1", 0, 5), n("store", "p1", 1000, 6)),
			[]Fault{fault(FaultRestartEmpty, 500, 800)}, []string{"window"}, nil},

		// Faults whose own allowance is nothing.
		{"freeze: nothing of its own", closed, nil, n("store", "p1", 0, 11), []Fault{fault(FaultFreeze, 0, 1000)}, []string{"bucket"}, nil},
		{"cut: nothing of its own", closed, nil, n("store", "p1", 0, 11), []Fault{fault(FaultCut, 0, 1000)}, []string{"bucket"}, nil},
		{"script-flush: nothing of its own", closed, nil, n("store", "p1", 0, 11), []Fault{fault(FaultScriptFlush, 0, 1000)}, []string{"bucket"}, nil},
		{"slot-move: nothing of its own", closed, nil, n("store", "p1", 0, 11), []Fault{fault(FaultSlotMove, 0, 1000)}, []string{"bucket"}, nil},
		{"slot-move: its local fallback", localFallback, nil, cat(n("store", "p1", 0, 10), n("overload-local", "p1", 200, 5)),
			[]Fault{fault(FaultSlotMove, 100, 1000)}, nil, []ex{{FaultSlotMove, "5", "10"}}},
		{"sluice-kill: nothing of its own", closed, nil, n("store", "p1", 0, 11), []Fault{sluiceKill}, []string{"bucket"}, nil},
		{"sluice-kill: a new local bucket", localFallback, nil, cat(n("fallback-local", "p1", 0, 5), n("fallback-local", "p1", 2000, 5)),
			[]Fault{sluiceKill}, nil, nil},
		{"sluice-kill: a new local bucket beside the store's", localFallback, nil,
			cat(n("store", "p1", 0, 10), n("fallback-local", "p1", 200, 5), n("fallback-local", "p1", 2000, 5)),
			[]Fault{sluiceKill}, nil, []ex{{ExcessFallback, "5", "10"}, {FaultSluiceKill, "10", "15"}}}, // the first 15, before the kill: the fallback's
		{"sluice-kill: a new local bucket, one over", localFallback, nil, cat(n("fallback-local", "p1", 0, 5), n("fallback-local", "p1", 2000, 6)),
			[]Fault{sluiceKill}, []string{"local-share"}, nil},
		{"sluice-kill: without the fault", localFallback, nil, cat(n("fallback-local", "p1", 0, 5), n("fallback-local", "p1", 2000, 5)),
			nil, []string{"local-share"}, nil},
		{"sluice-kill: of the other instance", localFallback, nil, cat(n("fallback-local", "p2", 0, 5), n("fallback-local", "p2", 2000, 5)),
			[]Fault{sluiceKill}, []string{"local-share"}, nil},

		// home-down: a global key's floor.
		{"home-down: the floor", global, nil, n("region", "p1", 0, 11), []Fault{{Kind: FaultHomeDown, Target: "home", From: at(50), To: at(1000)}},
			nil, []ex{{FaultHomeDown, "1", "1"}}},
		{"home-down: the floor one over", global, nil, n("region", "p1", 0, 12), []Fault{{Kind: FaultHomeDown, Target: "home", From: at(50), To: at(1000)}},
			[]string{"region"}, nil},
		{"the floor with no home-down", global, nil, n("region", "p1", 0, 11), nil, nil, []ex{{ExcessRegion, "1", "1"}}},
		{"home-down: not a regional key's", closed, nil, n("store", "p1", 0, 11), []Fault{{Kind: FaultHomeDown, Target: "home", From: at(50), To: at(1000)}},
			[]string{"bucket"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := &KeyLog{Key: "k", Policy: "p", Adm: tt.adm, Slots: tt.slots}
			res := Check(k, []Span{{V: tt.v, From: t0.Add(-time.Hour)}}, Slack{Lease: 300 * time.Millisecond, Instances: 2}, tt.faults)
			var got []string
			for _, v := range res.Violations {
				got = append(got, v.Kind)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("violations %q, want %q: %v", got, tt.want, res.Violations)
			}
			var gotEx []ex
			for _, e := range res.Excess {
				gotEx = append(gotEx, ex{e.Kind, num(e.Tokens), num(e.Bound)})
			}
			if tt.want == nil && !slices.Equal(gotEx, tt.ex) {
				t.Errorf("excess %v, want %v", gotEx, tt.ex)
			}
			for _, e := range res.Excess {
				if tt.want == nil && e.Tokens > e.Bound+1e-6 {
					t.Errorf("excess %v past its own bound", e)
				}
			}
		})
	}
}

// A kill's excess tells durability none from replica, so the report can
// show them apart; the excess of a replica policy under a kill can only be
// its fallback's, never the store's.
func TestFaultExcessDurability(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	kill := Fault{Kind: FaultKill, Target: "127.0.0.1:7000", From: at(1500), To: at(3500)}
	for _, tt := range []struct {
		durab string
		want  Excess
	}{
		{"none", Excess{Kind: FaultKill, Durability: "none", Tokens: 2, Store: 2}},
		{"replica", Excess{Kind: FaultKill, Durability: "replica", Tokens: 2, Store: 0}},
	} {
		v := Variant{Name: "p", Algorithm: "token_bucket", Limit: 2, Rate: 1, Period: 24 * time.Hour, OnStoreError: "local", LocalShare: 1, Durability: tt.durab}
		var adm []Admission
		for i, by := range []string{"store", "store", "fallback-local", "fallback-local"} {
			m := 1450 + 20*i // the two spends in the kill's lost window
			if i >= 2 {
				m = 3600 + 20*i // after the promotion
			}
			adm = append(adm, Admission{Sent: at(m), Recv: at(m + 1), Cost: 1, By: by, Proc: "p1"})
		}
		if tt.durab == "none" { // the promoted replica admits the 2 lost spends again
			adm[2].By, adm[3].By = "store", "store"
		}
		k := &KeyLog{Key: "k", Policy: "p", Adm: adm}
		res := Check(k, []Span{{V: v, From: t0.Add(-time.Hour)}}, Slack{Instances: 2}, []Fault{kill})
		if len(res.Violations) != 0 || len(res.Excess) != 1 {
			t.Fatalf("durability %s: violations %v, excess %v, want one excess", tt.durab, res.Violations, res.Excess)
		}
		got := res.Excess[0]
		got.Tokens, got.Store = float64(int(got.Tokens+0.5)), float64(int(got.Store+0.5))
		if got.Kind != tt.want.Kind || got.Durability != tt.want.Durability || got.Tokens != tt.want.Tokens || got.Store != tt.want.Store {
			t.Errorf("durability %s: got %+v, want %+v", tt.durab, got, tt.want)
		}
	}
}

// A kill may let a split key admit once more the budget its main bucket
// moved to the sub-buckets within the kill's replication lag (they live on
// other nodes; the promoted main bucket never lost it): one limit at most,
// beyond the lost spends. Over that is a violation, and a key not split
// gets no such allowance.
func TestFaultKillSplit(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	kill := Fault{Kind: FaultKill, Target: "127.0.0.1:7000", HeldBack: at(1000), From: at(1500), To: at(3500)}
	for _, tt := range []struct {
		name string
		hot  string
		n    int // admissions, all at once after the kill, decided by the sub-buckets
		want []string
	}{
		{"split, one limit more", "split", 8, nil},
		{"split, one token past it", "split", 9, []string{"bucket"}},
		{"not split", "", 5, []string{"bucket"}},
	} {
		v := Variant{Name: "p", Algorithm: "token_bucket", Limit: 4, Rate: 1, Period: 24 * time.Hour, Hot: tt.hot, OnStoreError: "closed", LocalShare: 1}
		var adm []Admission
		for i := range tt.n {
			adm = append(adm, Admission{Sent: at(3600 + i), Recv: at(3601 + i), Cost: 1, By: "split", Proc: "p1"})
		}
		k := &KeyLog{Key: "k", Policy: "p", Adm: adm}
		res := Check(k, []Span{{V: v, From: t0.Add(-time.Hour)}}, Slack{Instances: 2}, []Fault{kill})
		var got []string
		for _, x := range res.Violations {
			got = append(got, x.Kind)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: violations %v, want kinds %v", tt.name, res.Violations, tt.want)
		}
	}
}

// A give-back applied within a kill's replication lag may be forgotten with
// it (a give-back never waits for a replica): the promoted replica holds
// its receipt unused, and a second give-back of it is applied. That is no
// receipt violation when the first lies in the kill's lost window and the
// second came after the kill; it is one without the kill, with the first
// before the window, or with the second before the kill. Either way the
// receipt is credited once.
func TestFaultForgottenGiveBack(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	v := Variant{Name: "p", Algorithm: "token_bucket", Limit: 4, Rate: 1, Period: 24 * time.Hour, OnStoreError: "closed", LocalShare: 1}
	kill := Fault{Kind: FaultKill, Target: "127.0.0.1:7000", HeldBack: at(1000), From: at(1500), To: at(3500)}
	back := func(ms int) GiveBack {
		return GiveBack{Sent: at(ms), Recv: at(ms + 1), Delta: 2, Receipt: "r1", Applied: true, By: "store", Who: "owner", User: "owner"}
	}
	for _, tt := range []struct {
		name          string
		first, second int
		faults        []Fault
		want          int // receipt violations
	}{
		{"first in the lost window, second after the kill", 1200, 3600, []Fault{kill}, 0},
		{"no kill", 1200, 3600, nil, 1},
		{"first before the window", 500, 3600, []Fault{kill}, 1},
		{"second before the kill", 1200, 1400, []Fault{kill}, 1},
	} {
		k := &KeyLog{Key: "k", Policy: "p",
			Adm:      []Admission{{Sent: at(100), Recv: at(101), Cost: 2, By: "store", Proc: "p1"}},
			Receipts: map[string]Taken{"r1": {Cost: 2, Who: "owner", User: "owner"}},
			Backs:    []GiveBack{back(tt.first), back(tt.second)}}
		res := Check(k, []Span{{V: v, From: t0.Add(-time.Hour)}}, Slack{Instances: 2}, tt.faults)
		got := 0
		for _, x := range res.Violations {
			if x.Kind == "receipt" {
				got++
			}
		}
		if got != tt.want {
			t.Errorf("%s: %d receipt violations %v, want %d", tt.name, got, res.Violations, tt.want)
		}
	}
}

// FaultTable: one row per kind, a kill split by durability, 0 where a
// kind was injected with no excess, the largest excess as a share of its
// bound, and rows for excesses outside every fault.
func TestFaultTable(t *testing.T) {
	faults := []Fault{{Kind: FaultFreeze}, {Kind: FaultKill}, {Kind: FaultKill}, {Kind: FaultRestartEmpty}}
	excess := []Excess{
		{Key: "a", Kind: FaultFreeze, Fault: 0, Tokens: 3, Bound: 7},
		{Key: "b", Kind: FaultFreeze, Fault: 0, Tokens: 2, Bound: 7},
		{Key: "a", Kind: FaultKill, Fault: 1, Tokens: 4, Bound: 6, Durability: "none", Store: 4},
		{Key: "c", Kind: FaultKill, Fault: 2, Tokens: 1.5, Bound: 10, Durability: "replica"},
		{Key: "d", Kind: ExcessFallback, Fault: -1, Tokens: 2, Bound: 20},
	}
	want := strings.Join([]string{
		"| fault | injected | keys with an excess | largest excess (share of its bound) | of it by the store |",
		"|---|--:|--:|---|--:|",
		"| freeze | 1 | 2 | 3 tokens (0.43 of 7) | 0 |",
		"| cut | 0 | 0 | 0 | 0 |",
		"| kill (durability none) | 2 | 1 | 4 tokens (0.67 of 6) | 4 |",
		"| kill (durability replica) | 2 | 1 | 1.5 tokens (0.15 of 10) | 0 |",
		"| restart-empty | 1 | 0 | 0 | 0 |",
		"| script-flush | 0 | 0 | 0 | 0 |",
		"| slot-move | 0 | 0 | 0 | 0 |",
		"| sluice-kill | 0 | 0 | 0 | 0 |",
		"| home-down | 0 | 0 | 0 | 0 |",
		"| fallback (outside every fault) | — | 1 | 2 tokens (0.10 of 20) | 0 |",
	}, "\n") + "\n"
	if got := FaultTable(faults, excess); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := FaultTable(nil, nil); !strings.Contains(got, "| kill (durability none) | 0 | 0 | 0 | 0 |") {
		t.Errorf("no faults: %s", got)
	}
}
