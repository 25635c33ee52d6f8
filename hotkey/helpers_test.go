package hotkey

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// t0 starts every fake clock on a whole second, so that tests know where
// the sketch's windows turn.
var t0 = time.Unix(1_700_000_000, 0)

// clock is a fake clock, safe for concurrent use (the expiry goroutine
// reads it).
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(t0.UnixNano())
	return c
}

func (c *clock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// newLayer returns a Layer on store, closed at cleanup.
func newLayer(t testing.TB, store limit.Store, c *clock, cfg Config) *Layer {
	t.Helper()
	cfg.Store = store
	if cfg.Now == nil {
		cfg.Now = c.Now
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

// newStore returns the in-process store on clock c.
func newStore(c *clock) *local.Store { return local.New(local.Config{Now: c.Now}) }

// faultStore wraps a store: it fails every item with an unavailable error
// while down is set, and records the most claims it saw in flight at once.
type faultStore struct {
	limit.Store
	down     atomic.Bool
	inflight atomic.Int64
	maxIn    atomic.Int64
	calls    atomic.Int64
	gate     chan struct{} // when not nil, every call waits on it
}

func (f *faultStore) Do(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	f.calls.Add(1)
	claims := int64(0)
	for _, r := range reqs {
		if r.Op == limit.OpClaim {
			claims++
		}
	}
	n := f.inflight.Add(claims)
	for {
		m := f.maxIn.Load()
		if n <= m || f.maxIn.CompareAndSwap(m, n) {
			break
		}
	}
	defer f.inflight.Add(-claims)
	if f.gate != nil {
		<-f.gate
	}
	if f.down.Load() {
		for i := range out {
			out[i] = limit.Result{Err: &limit.UnavailableError{Node: "fake", Err: context.DeadlineExceeded}}
		}
		return
	}
	f.Store.Do(ctx, reqs, out)
}

// take decides one request as the limiter does: through the Layer when
// Observe says the key is hot, else straight to the store.
func take(h *Layer, store limit.Store, key string, cost int64, p *limit.Policy, now time.Time) limit.Result {
	req := []limit.Request{{Key: key, Cost: cost, Policy: p}}
	out := make([]limit.Result, 1)
	if h.Observe(key, p, now) {
		h.Decide(context.Background(), req, out)
	} else {
		store.Do(context.Background(), req, out)
	}
	return out[0]
}

// peek returns the whole tokens left in key's bucket.
func peek(t testing.TB, store limit.Store, key string, p *limit.Policy) int64 {
	t.Helper()
	out := make([]limit.Result, 1)
	store.Do(context.Background(), []limit.Request{{Key: key, Cost: 1, Op: limit.OpPeek, Policy: p}}, out)
	if out[0].Err != nil {
		t.Fatal(out[0].Err)
	}
	return out[0].Remaining
}

// waitFor polls cond until it holds or 5s pass: the expiry goroutine runs on
// a real ticker.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}
