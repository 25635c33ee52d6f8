package hotkey

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/limit"
)

func splitPolicy(lim, rate int64, k int) *limit.Policy {
	return &limit.Policy{Name: "api", Limit: lim, Rate: rate, Period: time.Second,
		Hot: limit.Hot{Mode: limit.HotSplit, Threshold: 50, Split: k}}
}

// The sub-buckets of one key land on 8 different Redis Cluster slots, also
// when the key has a hash tag of its own.
func TestSubKeySlots(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"acme", "{acme}:login", "login:{acme}", "a{}b", "{", "}{x}", "tenant:42:api", ""} {
		slots := map[int]string{}
		for i := range 8 {
			sub := subKey(key, i)
			slot := cluster.Slot(cluster.Key(sub))
			if prev, dup := slots[slot]; dup {
				t.Errorf("key %q: sub-keys %q and %q share slot %d", key, prev, sub, slot)
			}
			slots[slot] = sub
		}
	}
	if got := subKey("{acme}:login", 3); got != "{s3:{acme}:login}" {
		t.Fatalf("subKey = %q", got)
	}
}

func TestSubPolicies(t *testing.T) {
	t.Parallel()
	c := newClock()
	h := newLayer(t, newStore(c), c, Config{})
	for _, tt := range []struct {
		limit, rate int64
		k, wantK    int
	}{
		{100, 50, 8, 8}, {7, 1000, 8, 7}, {1000, 3, 8, 3}, {80, 80, 8, 8}, {1, 100, 8, 0}, {100, 100, 2, 2}, {1 << 30, 1_000_000, 64, 64},
	} {
		p := splitPolicy(tt.limit, tt.rate, tt.k)
		subs := h.subPolicies(p)
		if len(subs) != tt.wantK {
			t.Errorf("limit %d rate %d split %d: %d sub-buckets, want %d", tt.limit, tt.rate, tt.k, len(subs), tt.wantK)
			continue
		}
		if subs == nil {
			continue
		}
		var lim, rate int64
		for i, s := range subs {
			lim += s.Limit
			rate += s.Rate
			if s.Limit < 1 || s.Rate < 1 || s.Hot.Mode != limit.HotOff || s.Period != p.Period {
				t.Errorf("sub-bucket %d = %+v", i, s)
			}
			if i > 0 && (s.Limit > subs[i-1].Limit || s.Rate > subs[i-1].Rate) {
				t.Errorf("sub-bucket %d is larger than sub-bucket %d", i, i-1)
			}
		}
		if lim != p.Limit || rate != p.Rate {
			t.Errorf("limit %d rate %d: sub-buckets sum to limit %d rate %d", p.Limit, p.Rate, lim, rate)
		}
		if again := h.subPolicies(p); &again[0] != &subs[0] && again[0] != subs[0] {
			t.Error("sub-bucket policies are not stable")
		}
	}
}

// Split never admits more than the bucket would, and, with the second try,
// not much less.
func TestSplitNeverOverAdmits(t *testing.T) {
	t.Parallel()
	c := newClock()
	store := newStore(c)
	h := newLayer(t, store, c, Config{})
	p := splitPolicy(80, 40, 8)
	var admitted int64
	for range 1000 {
		res := take(h, store, "acme", 1, p, c.Now())
		if res.Allowed {
			admitted++
		} else if res.RetryAfterMs < 1 {
			t.Fatalf("rejected with retry_after %d", res.RetryAfterMs)
		}
	}
	// The first 49 requests went to the main bucket before the key was
	// hot (threshold 50); the split sub-buckets then start full: a switch
	// of mode is a fresh burst, documented.
	if admitted > 49+80 || admitted < 49+72 {
		t.Fatalf("admitted %d at one instant, want 49 (main bucket, before hot) + 80 (sub-buckets)", admitted)
	}
	admitted = 0
	const run = 10 * time.Second
	for tm := time.Duration(0); tm < run; tm += time.Millisecond {
		c.Add(time.Millisecond)
		for range 3 {
			if res := take(h, store, "acme", 1, p, c.Now()); res.Allowed {
				admitted++
			}
		}
	}
	if bound := p.Rate * int64(run/time.Second); admitted > bound || admitted < bound*9/10 {
		t.Fatalf("admitted %d over %v at 3000 req/s, want ≤ %d and ≥ 90%% of it", admitted, run, bound)
	}
	if s := h.Stats(); s.SplitDecisions == 0 || s.SplitRetries == 0 {
		t.Fatalf("stats %+v: want split decisions and second tries", s)
	}
}

// A request rejected by its sub-bucket tries one other before it is
// rejected.
func TestSplitSecondTry(t *testing.T) {
	t.Parallel()
	c := newClock()
	store := newStore(c)
	h := newLayer(t, store, c, Config{})
	p := splitPolicy(20, 2, 2)
	p.Period = 4 * time.Second // each sub-bucket refills 1 token per 4s
	heat(t, h, "acme", p, c.Now())
	// Drain sub-bucket 0 behind the Layer's back.
	subs := h.subPolicies(p)
	out := make([]limit.Result, 1)
	store.Do(context.Background(), []limit.Request{{Key: subKey("acme", 0), Cost: 10, Policy: subs[0]}}, out)
	for i := range 10 {
		res := decideOne(h, "acme", 1, p)
		want := limit.Result{Allowed: true, Limit: 20, Remaining: (9 - int64(i)) * 2, RetryAfterMs: -1,
			ResetAfterMs: res.ResetAfterMs, DecidedBy: limit.BySplit}
		if res != want {
			t.Fatalf("take %d = %+v, want %+v", i, res, want)
		}
	}
	res := decideOne(h, "acme", 1, p)
	if res.Allowed || res.Remaining != 0 || res.RetryAfterMs != 4000 || res.DecidedBy != limit.BySplit {
		t.Fatalf("take with both sub-buckets empty = %+v, want rejected, retry 4000ms", res)
	}
}

func TestSplitCosts(t *testing.T) {
	t.Parallel()
	c := newClock()
	store := newStore(c)
	h := newLayer(t, store, c, Config{})
	p := splitPolicy(81, 80, 8) // sub-bucket 0 holds 11, the others 10
	heat(t, h, "acme", p, c.Now())
	// Cost 11 fits only sub-bucket 0: admitted once, then it is empty.
	if res := decideOne(h, "acme", 11, p); !res.Allowed || res.Remaining != 0 || res.DecidedBy != limit.BySplit {
		t.Fatalf("cost 11 = %+v, want admitted by sub-bucket 0", res)
	}
	if res := decideOne(h, "acme", 11, p); res.Allowed || res.RetryAfterMs != 1100 {
		t.Fatalf("cost 11 again = %+v, want rejected, retry 1100ms", res)
	}
	// Cost 12 fits no sub-bucket: rejected for good, like cost > limit.
	res := decideOne(h, "acme", 12, p)
	if res.Allowed || res.RetryAfterMs != -1 || res.Limit != 81 || res.DecidedBy != limit.BySplit {
		t.Fatalf("cost 12 = %+v, want rejected, retry -1, limit 81, by split", res)
	}
	// A peek spends nothing.
	for range 5 {
		if res := peekOne(h, "acme", 10, p); !res.Allowed {
			t.Fatalf("peek 10 = %+v", res)
		}
	}
}

func peekOne(h *Layer, key string, cost int64, p *limit.Policy) limit.Result {
	out := make([]limit.Result, 1)
	h.Decide(context.Background(), []limit.Request{{Key: key, Cost: cost, Op: limit.OpPeek, Policy: p}}, out)
	return out[0]
}

// With a store that fails, split reports its error so that the limiter
// applies on_store_error.
func TestSplitStoreFailure(t *testing.T) {
	t.Parallel()
	c := newClock()
	fs := &faultStore{Store: newStore(c)}
	h := newLayer(t, fs, c, Config{})
	p := splitPolicy(80, 80, 8)
	heat(t, h, "acme", p, c.Now())
	fs.down.Store(true)
	if res := decideOne(h, "acme", 1, p); res.Err == nil {
		t.Fatalf("split with the store down = %+v, want an error", res)
	}
}
