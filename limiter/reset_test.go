package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/hotkey"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// hotLimiter is a Limiter with a hot-key layer over store. The lease TTL
// is an hour so that the expiry sweep (every half TTL, on a real ticker)
// never runs during a test and only RL.RESET can clear a lease.
func hotLimiter(t *testing.T, store limit.Store, p *limit.Policy) *Limiter {
	t.Helper()
	hot, err := hotkey.New(hotkey.Config{Store: store, LeaseTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hot.Close(context.Background()) })
	l, err := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: store, Hot: hot})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// drain takes key until a take on the hot path (decided_by by) is
// rejected, and returns how many were admitted.
func drain(t *testing.T, l *Limiter, key, by string) int {
	t.Helper()
	admitted := 0
	for range 1000 {
		r := take(t, l, key)[0]
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if r.Allowed {
			admitted++
		} else if r.DecidedBy == by {
			return admitted
		}
	}
	t.Fatalf("1000 takes of %s and no rejection decided by %s", key, by)
	return 0
}

// RL.RESET of a hot key clears its hot state on this instance: the
// lease's reject-until and leased tokens, and the split sub-buckets in the
// store; the next take is admitted, and the key's budget is the policy's
// again, no more.
func TestResetHotKey(t *testing.T) {
	t.Parallel()
	t.Run("lease: reject-until", func(t *testing.T) {
		t.Parallel()
		p := &limit.Policy{Name: "api", Limit: 10, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed,
			Hot: limit.Hot{Mode: limit.HotLease, Threshold: 5}}
		l := hotLimiter(t, local.New(local.Config{DecidedBy: limit.ByStore}), p)
		drain(t, l, "viral", limit.ByLease)
		if _, err := l.Reset(context.Background(), "viral"); err != nil {
			t.Fatal(err)
		}
		if r := take(t, l, "viral")[0]; !r.Allowed {
			t.Fatalf("the first take after RL.RESET: %+v, want admitted", r)
		}
	})
	t.Run("lease: leased tokens", func(t *testing.T) {
		t.Parallel()
		p := &limit.Policy{Name: "api", Limit: 64, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed,
			Hot: limit.Hot{Mode: limit.HotLease, Threshold: 5}}
		l := hotLimiter(t, local.New(local.Config{DecidedBy: limit.ByStore}), p)
		for i := 0; ; i++ { // until a take is answered from a lease, which then holds the rest of its block
			if r := take(t, l, "viral")[0]; r.DecidedBy == limit.ByLease {
				break
			} else if i > 100 {
				t.Fatal("no lease")
			}
		}
		if _, err := l.Reset(context.Background(), "viral"); err != nil {
			t.Fatal(err)
		}
		if got := drain(t, l, "viral", limit.ByLease); got != 64 {
			t.Fatalf("after RL.RESET the key admitted %d before a rejection, want its limit, 64", got)
		}
	})
	t.Run("split", func(t *testing.T) {
		t.Parallel()
		p := &limit.Policy{Name: "api", Limit: 16, Rate: 4, Period: time.Hour, OnStoreError: limit.FailClosed,
			Hot: limit.Hot{Mode: limit.HotSplit, Threshold: 5, Split: 4}}
		store := local.New(local.Config{DecidedBy: limit.ByStore})
		l := hotLimiter(t, store, p)
		drain(t, l, "viral", limit.BySplit)
		if n := store.Len(); n < 2 {
			t.Fatalf("the store holds %d buckets after a split drain, want the main one and sub-buckets", n)
		}
		existed, err := l.Reset(context.Background(), "viral")
		if err != nil || !existed {
			t.Fatalf("RL.RESET: %v %v, want true", existed, err)
		}
		// The reset's one fresh budget is the main bucket's: the
		// sub-buckets are left empty (another instance may be in a spell).
		if n := store.Len(); n != 4 {
			t.Fatalf("after RL.RESET the store holds %d buckets of the key, want the 4 sub-buckets, empty", n)
		}
		if r := take(t, l, "viral")[0]; !r.Allowed {
			t.Fatalf("the first take after RL.RESET: %+v, want admitted", r)
		}
		if got := 1 + drain(t, l, "viral", limit.BySplit); got > 16 {
			t.Fatalf("after RL.RESET the key admitted %d, more than its limit, 16", got)
		}
	})
}
