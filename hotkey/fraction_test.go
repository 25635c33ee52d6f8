package hotkey

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// hsPolicy is the checker's hs policy.
func hsPolicy() *limit.Policy {
	return &limit.Policy{Name: "hs", Limit: 16, Rate: 8, Period: time.Second,
		Hot: limit.Hot{Mode: limit.HotSplit, Threshold: 20, Split: 4}}
}

// shareZero plays the checker's hs.i947.a on h over store, with clock now
// and wait: an RL.RESET, 454 ms, a burst of 80 (the store admits the main
// bucket's 16, the key turns hot, the hand-over finds G = 0), 236 ms, and
// a burst of 22 under a reloaded policy (a new pointer, the same numbers,
// as after the SIGHUP). It fails when the two bursts admit more than
// limit + rate × elapsed, and returns the policy the second burst used.
func shareZero(t *testing.T, h *Layer, store limit.Store, now func() time.Time, wait func(time.Duration)) *limit.Policy {
	t.Helper()
	p := hsPolicy()
	const key = "hs.i947.a"
	ctx := context.Background()
	if _, err := store.Reset(ctx, key, p); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Reset(ctx, key, p); err != nil {
		t.Fatal(err)
	}
	wait(454 * time.Millisecond)
	burst := func(n int, p *limit.Policy) (byStore, bySplit int64) {
		for range n {
			res := take(h, store, key, 1, p, now())
			switch {
			case res.Err != nil:
				t.Fatal(res.Err)
			case res.Allowed && res.DecidedBy == limit.BySplit:
				bySplit++
			case res.Allowed:
				byStore++
			}
		}
		return byStore, bySplit
	}
	start := now()
	main, split := burst(80, p)
	// The main bucket's 16, and on real time what refilled while the
	// burst ran (none on the test clock).
	refilled := int64(float64(p.Rate) * now().Sub(start).Seconds())
	if main < 16 || main > 16+refilled || split != 0 {
		t.Fatalf("first burst admitted %d by the store and %d by split, want 16 (+%d refilled) and 0", main, split, refilled)
	}
	wait(236 * time.Millisecond)
	q := *p
	s2, split2 := burst(22, &q)
	admitted := main + split + s2 + split2
	elapsed := now().Sub(start)
	bound := float64(p.Limit) + float64(p.Rate)*elapsed.Seconds()
	t.Logf("admitted %d (store) + %d (split) in %v, bound %.2f", main+s2, split+split2, elapsed, bound)
	if float64(admitted) > bound {
		t.Fatalf("admitted %d in %v, bound %.2f (limit + rate × elapsed): the split path admitted %d", admitted, elapsed, bound, split+split2)
	}
	return &q
}

// The checker's hs.i947.a: an RL.RESET leaves the sub-buckets empty and
// they refill beside the full main bucket; 454 ms later the main bucket is
// drained, the key turns hot and the hand-over finds G = 0, so every
// sub-bucket's share is 0, and each holds 0.9 of a token (2/s), which no
// claim of whole tokens takes. 236 ms later each had 1.37: the split path
// admitted 4 where 8 × 0.236 ≈ 1.9 tokens had refilled in all. A
// sub-bucket whose share is 0 and that is not exactly full must be left
// with nothing, not a fraction. (The reload plays no part: with the same
// pointer it admitted 4 too.)
func TestSplitHandoffShareZeroTakesTheFraction(t *testing.T) {
	t.Parallel()
	c := newClock()
	store := newStore(c)
	h := newLayer(t, store, c, Config{})
	q := shareZero(t, h, store, c.Now, c.Add)
	// The hold on the emptied sub-buckets (one token interval, 500 ms)
	// ends: over the next 3 s the split path admits the refill, less at
	// most one token a sub-bucket and what whole tokens leave.
	var later int64
	const run = 3 * time.Second
	for tm := time.Duration(0); tm < run; tm += time.Millisecond {
		c.Add(time.Millisecond)
		if res := take(h, store, "hs.i947.a", 1, q, c.Now()); res.Err != nil {
			t.Fatal(res.Err)
		} else if res.Allowed {
			later++
		}
	}
	t.Logf("then %d admitted in %v at 1000 req/s", later, run)
	if refill := q.Rate * int64(run/time.Second); later > refill+2 || later < refill-int64(len(h.subPolicies(q)))-2 {
		t.Fatalf("admitted %d in the %v after, want about the refill %d", later, run, refill)
	}
}

// The same on a real Redis Cluster, on real time: the scripts leave the
// fraction as the in-process store does, and a hold empties it.
func TestSplitHandoffShareZeroOnCluster(t *testing.T) {
	t.Parallel()
	rc := redistest.NewCluster(t, localredis.Config{})
	store, err := cluster.New(cluster.Config{Addrs: rc.Addrs(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	h, err := New(Config{Store: store, Timeout: func() time.Duration { return 5 * time.Second }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	shareZero(t, h, store, time.Now, time.Sleep)
}

// G = 2 over K = 4 sub-buckets, each 0.9 of a token from empty after an
// RL.RESET: shares 1, 1, 0, 0. A share of 1 not exactly full keeps its
// fraction (0 whole + 0.9 ≤ 1) and is not held; a share of 0 is emptied
// and held for one token interval (500 ms), fraction and all.
func TestSplitHandoffShareZeroOnlyHoldsShareZero(t *testing.T) {
	t.Parallel()
	c := newClock()
	store := newStore(c)
	h := newLayer(t, store, c, Config{})
	p := hsPolicy()
	subs := h.subPolicies(p)
	const key = "acme"
	ctx := context.Background()
	if _, err := h.Reset(ctx, key, p); err != nil {
		t.Fatal(err)
	}
	c.Add(454 * time.Millisecond)
	out := make([]limit.Result, 1)
	store.Do(ctx, []limit.Request{{Key: key, Cost: 14, Policy: p}}, out) // the main bucket keeps 2
	heat(t, h, key, p, c.Now())
	if res := peekOne(h, key, 1, p); res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := peek(t, store, key, p); got != 0 {
		t.Fatalf("main bucket holds %d after the hand-over, want 0", got)
	}
	c.Add(100 * time.Millisecond) // 0.9 + 0.2: a whole token where nothing holds it
	var total int64
	for i, sp := range subs {
		got := peek(t, store, subKey(key, i), sp)
		want := b2i(i < 2)
		total += got
		if got != want {
			t.Errorf("sub-bucket %d holds %d 100ms after the hand-over, want %d", i, got, want)
		}
	}
	// What the main bucket held (2) + 8/s × 0.1 s.
	if total > 2 {
		t.Errorf("sub-buckets hold %d in all, want at most 2", total)
	}
	c.Add(500 * time.Millisecond) // the holds ended 100 ms ago: 0.2 each
	for i := 2; i < 4; i++ {
		if got := peek(t, store, subKey(key, i), subs[i]); got != 0 {
			t.Errorf("sub-bucket %d holds %d 600ms after the hand-over, want 0 (held until 500ms, 2/s)", i, got)
		}
	}
	c.Add(400 * time.Millisecond) // 1.0 each
	for i := 2; i < 4; i++ {
		if got := peek(t, store, subKey(key, i), subs[i]); got != 1 {
			t.Errorf("sub-bucket %d holds %d 1s after the hand-over, want 1", i, got)
		}
	}
}
