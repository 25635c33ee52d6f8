package hotkey

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// An RL.RESET run on another instance deletes the key in the store but
// cannot reach this instance's lease: that lease answers (here: rejects,
// from an empty claim's wait of ten hours) for one lease TTL after its
// last claim, and not a moment longer, whenever the expiry sweep runs.
// The TTL is an hour so that the sweep, on a real ticker, never runs here.
func TestLeaseAnswersOneTTLAfterAResetElsewhere(t *testing.T) {
	t.Parallel()
	c := newClock()
	store := newStore(c)
	h := newLayer(t, store, c, Config{LeaseTTL: time.Hour})
	p := leasePolicy(10, 1, 10*time.Hour)
	// The bucket is drained by the store before the key turns hot; the
	// lease's first claim, at the rejection, finds no token.
	for i := 0; ; i++ {
		r := take(h, store, "acme", 1, p, c.Now())
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if !r.Allowed && r.DecidedBy == limit.ByLease {
			break
		}
		if i > 1000 {
			t.Fatal("the lease never rejected")
		}
		c.Add(time.Millisecond)
	}
	claims := h.Stats().Claims
	if _, err := store.Reset(context.Background(), "acme", p); err != nil { // RL.RESET elsewhere
		t.Fatal(err)
	}
	c.Add(time.Hour - 2*time.Millisecond)
	if r := take(h, store, "acme", 1, p, c.Now()); r.Allowed || r.DecidedBy != limit.ByLease {
		t.Fatalf("within the TTL: %+v, want a rejection by the lease", r)
	}
	c.Add(2 * time.Millisecond)
	if r := take(h, store, "acme", 1, p, c.Now()); !r.Allowed {
		t.Fatalf("one lease TTL after the last claim: %+v (claims %d → %d), want admitted from a new claim", r, claims, h.Stats().Claims)
	}
}

// Reset drops the tokens of the key's lease and its queued returns: they
// were taken from the bucket RL.RESET refilled, and given back they would
// over-fill it. It also takes the key out of the hot map.
func TestResetDropsLeasedTokens(t *testing.T) {
	t.Parallel()
	c := newClock()
	store := newStore(c)
	h, err := New(Config{Store: store, Now: c.Now, LeaseTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p := leasePolicy(64, 1, time.Hour)
	for i := 0; ; i++ {
		if r := take(h, store, "acme", 1, p, c.Now()); r.DecidedBy == limit.ByLease {
			break
		} else if i > 1000 {
			t.Fatal("no lease")
		}
	}
	// Another key's lease: Close gives it back, as it would acme's.
	q := leasePolicy(1000, 1, time.Hour)
	for range 100 {
		take(h, store, "other", 1, q, c.Now())
	}
	ctx := context.Background()
	if _, err := store.Reset(ctx, "acme", p); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Reset(ctx, "acme", p); err != nil {
		t.Fatal(err)
	}
	for _, k := range h.HotKeys() {
		if k.Key == "acme" {
			t.Fatal("acme still listed hot after Reset")
		}
	}
	out := make([]limit.Result, 10)
	reqs := make([]limit.Request, 10)
	for i := range reqs {
		reqs[i] = limit.Request{Key: "acme", Cost: 1, Policy: p}
	}
	store.Do(ctx, reqs, out)
	otherBefore := peek(t, store, "other", q)
	if err := h.Close(ctx); err != nil { // gives back every lease still held
		t.Fatal(err)
	}
	if got := peek(t, store, "acme", p); got != 54 {
		t.Fatalf("after Reset and 10 takes the bucket holds %d at Close, want 54: the dropped lease's tokens came back", got)
	}
	if got := peek(t, store, "other", q); got <= otherBefore {
		t.Fatalf("another key's lease was not given back at Close: %d, before %d", got, otherBefore)
	}
}

// A claim in flight while Reset runs answers its request; the rest of its
// block is dropped with the lease, not given back: whether the claim took
// from the bucket before or after the reset, giving it back could over-fill
// the bucket.
func TestResetDuringClaim(t *testing.T) {
	t.Parallel()
	c := newClock()
	base := newStore(c)
	f := &faultStore{Store: base}
	h, err := New(Config{Store: f, Now: c.Now, LeaseTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p := leasePolicy(64, 1, time.Hour)
	for range 60 { // past the threshold; the bucket not yet leased from
		h.Observe("acme", p, c.Now())
	}
	if !h.Observe("acme", p, c.Now()) {
		t.Fatal("acme is not hot")
	}
	ctx := context.Background()
	f.gate = make(chan struct{})
	done := make(chan limit.Result)
	go func() {
		out := make([]limit.Result, 1)
		h.Decide(ctx, []limit.Request{{Key: "acme", Cost: 1, Policy: p}}, out)
		done <- out[0]
	}()
	waitFor(t, "the claim in flight", func() bool { return f.inflight.Load() == 1 })
	if _, err := base.Reset(ctx, "acme", p); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Reset(ctx, "acme", p); err != nil {
		t.Fatal(err)
	}
	close(f.gate)
	if r := <-done; !r.Allowed || r.DecidedBy != limit.ByLease {
		t.Fatalf("the request waiting on the claim: %+v, want admitted by lease", r)
	}
	claimed := h.Stats().TokensClaimed
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := peek(t, base, "acme", p); claimed < 2 || got != 64-claimed {
		t.Fatalf("the bucket holds %d after a claim of %d during Reset, want %d: the rest of the block dropped", got, claimed, 64-claimed)
	}
}
