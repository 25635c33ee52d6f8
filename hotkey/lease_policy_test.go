package hotkey

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// TestLeasePolicyChange: once the policies in force change, no token
// leased before admits or goes back, whichever way the Layer learns of it:
// a request under another policy for the key, or PoliciesChanged (a
// policy that changes and comes back keeps its pointer). Every case starts
// from one claim of a block of 10 under limit 160 (no refill to speak of):
// 9 held, 150 in the bucket.
func TestLeasePolicyChange(t *testing.T) {
	t.Parallel()
	p := leasePolicy(160, 1, time.Hour) // block bound 160/16 = 10
	small := leasePolicy(16, 1, time.Hour)
	start := func(t *testing.T, fs *faultStore, c *clock) *Layer {
		t.Helper()
		h := newLayer(t, fs, c, Config{LeaseTTL: time.Hour})
		heat(t, h, "k", p, c.Now())
		if res := decideOne(h, "k", 1, p); !res.Allowed || res.DecidedBy != limit.ByLease {
			t.Fatalf("first take: %+v", res)
		}
		if got := peek(t, fs, "k", p); got != 150 {
			t.Fatalf("bucket holds %d after the first claim, want 150", got)
		}
		return h
	}
	closeAndPeek := func(t *testing.T, h *Layer, fs *faultStore) int64 {
		t.Helper()
		if err := h.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		return peek(t, fs, "k", p)
	}

	t.Run("a request under a smaller policy", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		fs := &faultStore{Store: newStore(c)}
		h := start(t, fs, c)
		admitted := 0
		for range 30 {
			if res := decideOne(h, "k", 1, small); res.Allowed {
				admitted++
			} else if res.Err != nil {
				t.Fatal(res.Err)
			}
		}
		t.Logf("limit 160 → 16 with 9 tokens leased: %d of 30 admitted under limit 16", admitted)
		if admitted > 16 {
			t.Fatalf("%d admitted under limit 16 (no refill): tokens leased under limit 160 admitted", admitted)
		}
	})

	t.Run("a policy that changes and comes back", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		fs := &faultStore{Store: newStore(c)}
		h := start(t, fs, c)
		h.PoliciesChanged() // another policy in force for the key, never used here
		h.PoliciesChanged() // the first back, with its pointer
		if res := decideOne(h, "k", 1, p); !res.Allowed {
			t.Fatalf("take after the change back: %+v", res)
		}
		if s := h.Stats(); s.Claims != 2 || s.LeaseHits != 2 {
			t.Fatalf("stats %+v, want a second claim: the 9 tokens held before the changes admit nothing", s)
		}
		if got := closeAndPeek(t, h, fs); got != 149 {
			t.Fatalf("bucket holds %d after Close, want 149: the 9 of the second claim back, the 9 of the first dropped", got)
		}
	})

	t.Run("held tokens at expiry or Close", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		fs := &faultStore{Store: newStore(c)}
		h := start(t, fs, c)
		h.PoliciesChanged()
		if got := closeAndPeek(t, h, fs); got != 150 {
			t.Fatalf("bucket holds %d after Close, want 150: tokens leased before the change are dropped, not given back", got)
		}
		if s := h.Stats(); s.Returns != 0 {
			t.Fatalf("stats %+v, want no return", s)
		}
	})

	t.Run("a claim in flight across the change", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		fs := &faultStore{Store: newStore(c), gate: make(chan struct{})}
		h := newLayer(t, fs, c, Config{LeaseTTL: time.Hour})
		heat(t, h, "k", p, c.Now())
		took := make(chan limit.Result)
		go func() { took <- decideOne(h, "k", 1, p) }()
		waitFor(t, "the claim to be in flight", func() bool { return fs.inflight.Load() == 1 })
		h.PoliciesChanged()
		close(fs.gate)
		if res := <-took; !res.Allowed || res.DecidedBy != limit.ByLease {
			t.Fatalf("take: %+v", res)
		}
		if s := h.Stats(); s.Claims != 2 {
			t.Fatalf("stats %+v, want 2 claims: the one sent before the change is dropped, its take claims again", s)
		}
		if got := closeAndPeek(t, h, fs); got != 149 {
			t.Fatalf("bucket holds %d after Close, want 149 (140 after two claims, 9 back)", got)
		}
	})
}
