package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/hotkey"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// A hot key goes to the hot path (here leases) while a cold key of the same
// batch goes to the store, and the counters say which path answered.
func TestHotKeysTakeTheHotPath(t *testing.T) {
	t.Parallel()
	store := local.New(local.Config{DecidedBy: limit.ByStore})
	hot, err := hotkey.New(hotkey.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer hot.Close(context.Background())
	p := &limit.Policy{Name: "api", Limit: 100, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed,
		Hot: limit.Hot{Mode: limit.HotLease, Threshold: 5}}
	l, err := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: store, Hot: hot})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]int{}
	viral := 0 // admitted on the viral key
	for i := range 50 {
		for j, r := range take(t, l, "viral", "quiet:"+time.Now().String()) {
			if r.Err != nil {
				t.Fatalf("round %d item %d: %v", i, j, r.Err)
			}
			by[r.DecidedBy]++
			if j == 0 && r.Allowed {
				viral++
			}
		}
	}
	if by[limit.ByLease] == 0 || by[limit.ByStore] < 50 {
		t.Fatalf("decided_by counts %v: want leases for the viral key and the store for the quiet ones", by)
	}
	if s := l.Snapshot(); s.ByPath[limit.ByLease] != int64(by[limit.ByLease]) {
		t.Fatalf("lease count %d, replies said %d", s.ByPath[limit.ByLease], by[limit.ByLease])
	}
	// Leases never over-admit: 100 tokens, 1/hour.
	for range 200 {
		if take(t, l, "viral")[0].Allowed {
			viral++
		}
	}
	if viral > 100 || viral < 90 {
		t.Fatalf("admitted %d on one key of limit 100 and 1/hour, want 90..100", viral)
	}
}

// The default hot block (limit.Hot.Default) is for sparing a shard: over
// the embedded store (a *local.Store) a key far above its threshold stays
// on the store, while the same block written in the config takes the
// lease.
func TestDefaultHotSkippedInProcess(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		hot   limit.Hot
		lease bool
	}{
		{"default", limit.Hot{Mode: limit.HotLease, Threshold: 5, Default: true}, false},
		{"explicit", limit.Hot{Mode: limit.HotLease, Threshold: 5}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := local.New(local.Config{DecidedBy: limit.ByEmbedded})
			hot, err := hotkey.New(hotkey.Config{Store: store})
			if err != nil {
				t.Fatal(err)
			}
			defer hot.Close(context.Background())
			p := &limit.Policy{Name: "api", Limit: 1000, Rate: 1000, Period: time.Second, OnStoreError: limit.FailClosed, Hot: tt.hot}
			l, err := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: store, Hot: hot})
			if err != nil {
				t.Fatal(err)
			}
			by := map[string]int{}
			for range 200 {
				r := take(t, l, "viral")[0]
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				by[r.DecidedBy]++
			}
			if got := by[limit.ByLease] > 0; got != tt.lease || by[limit.ByLease]+by[limit.ByEmbedded] != 200 {
				t.Errorf("decided_by %v, want lease %v", by, tt.lease)
			}
		})
	}
}
