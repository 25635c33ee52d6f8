package hotkey

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
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
// when the key has a hash tag of its own, spread over the slot space: not
// all in one third of it (one primary of three), as tags that differ in
// one character put them (CRC16 is linear).
func TestSubKeySlots(t *testing.T) {
	t.Parallel()
	third := func(slot int) int { return slot * 3 / 16384 }
	for _, key := range []string{"hot:tenant", "acme", "{acme}:login", "login:{acme}", "a{}b", "{", "}{x}", "tenant:42:api", ""} {
		slots := map[int]string{}
		thirds := map[int]bool{}
		for i := range 8 {
			sub := subKey(key, i)
			slot := cluster.Slot(cluster.Key(sub))
			if prev, dup := slots[slot]; dup {
				t.Errorf("key %q: sub-keys %q and %q share slot %d", key, prev, sub, slot)
			}
			slots[slot] = sub
			thirds[third(slot)] = true
		}
		if len(thirds) < 2 {
			t.Errorf("key %q: all 8 sub-buckets in one third of the slots: %v", key, slots)
		}
	}
	// Whether two sub-buckets share a slot depends only on the length of
	// the tag after the prefix (CRC16 is linear): none do below 300 bytes.
	for n := range 300 {
		key := strings.Repeat("k", n)
		slots := map[int]int{}
		for i := range 8 {
			slot := cluster.Slot(cluster.Key(subKey(key, i)))
			if prev, dup := slots[slot]; dup {
				t.Errorf("a key of %d bytes: sub-buckets %d and %d share slot %d", n, prev, i, slot)
			}
			slots[slot] = i
		}
	}
	// Over many keys, every third gets its share.
	var per [3]int
	r := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		key := "tenant:" + strconv.FormatUint(r.Uint64(), 36)
		for i := range 8 {
			per[third(cluster.Slot(cluster.Key(subKey(key, i))))]++
		}
	}
	for i, n := range per {
		if n < 800/3*3/4 {
			t.Errorf("third %d of the slots holds %d of 800 sub-buckets: %v", i, n, per)
		}
	}
	// Every sub-bucket a policy may have gets its own tag, non-empty
	// whatever the key.
	tags := map[string]int{}
	for i := range 64 {
		tag := subTag(i)
		if prev, dup := tags[tag]; dup {
			t.Errorf("sub-buckets %d and %d share tag %q", prev, i, tag)
		}
		tags[tag] = i
		if got := subKey("}{x}", i); got != "{"+tag+":32g9h6ofw5cl6}}{x}" {
			t.Errorf("subKey(%q, %d) = %q", "}{x}", i, got)
		}
	}
	// The layout is shared by every instance and version: pin it.
	if got := subKey("{acme}:login", 3); got != "{dv33gdjs:"+fnv36("{acme}:login")+"}{acme}:login" {
		t.Fatalf("subKey = %q", got)
	}
	if got := subKey("a", 100); got != "{"+subTag(100)+":"+fnv36("a")+"}a" || len(subTag(100)) != 8 {
		t.Fatalf("subKey past the table = %q", got)
	}
}

// fnv36 is FNV-1a of s in base 36, as subKey's tag carries it.
func fnv36(s string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return strconv.FormatUint(h.Sum64(), 36)
}

// subKey is injective: the key is what follows the sub-key's first '}',
// and the tag names the sub-bucket, whatever braces the key holds.
func TestSubKeyInjective(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, k := range []string{"k", "{k}", "{t}k", "k}", "{}k", "}{x}", "{0123abcd:k}", "{dv33gdjs:x}y", ""} {
		for i := range 16 {
			s := subKey(k, i)
			who := fmt.Sprintf("%q/%d", k, i)
			if prev, dup := seen[s]; dup {
				t.Errorf("%s and %s share the sub-key %q", prev, who, s)
			}
			seen[s] = who
			if end := strings.IndexByte(s, '}'); s[end+1:] != k {
				t.Errorf("subKey(%s) = %q does not end in the key after its tag", who, s)
			}
		}
	}
}

// Keys with a '}' but no tag of their own that differ after it — tenant}1,
// tenant}2 — must not share the slots of their sub-buckets (the '}' used to
// end the tag there). Keys that share a tag share them, as they share a slot.
func TestSubKeyOfKeyWithBrace(t *testing.T) {
	t.Parallel()
	for _, shape := range []string{"tenant}%d", "a{}b%d", "x}}%d", "}%d"} {
		for i := range 8 {
			slots := map[int]bool{}
			for n := range 200 {
				slots[cluster.Slot(cluster.Key(subKey(fmt.Sprintf(shape, n), i)))] = true
			}
			if len(slots) < 150 {
				t.Errorf("sub-bucket %d of 200 keys %q: %d slots, want about 200", i, shape, len(slots))
			}
		}
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
	// hot (threshold 50); the hand-over then left the sub-buckets the 31
	// tokens the main bucket still held: no fresh burst.
	if admitted > 80 || admitted < 72 {
		t.Fatalf("admitted %d at one instant, want 49 (main bucket, before hot) + 31 (handed over to the sub-buckets)", admitted)
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
	decideOne(h, "acme", 1, p) // the hand-over: each sub-bucket gets its share
	// Drain sub-bucket 0 behind the Layer's back, and fill sub-bucket 1.
	subs := h.subPolicies(p)
	out := make([]limit.Result, 2)
	store.Do(context.Background(), []limit.Request{{Key: subKey("acme", 0), Cost: 10, Op: limit.OpClaim, Policy: subs[0]},
		{Key: subKey("acme", 1), Cost: 10, Op: limit.OpReturn, Policy: subs[1]}}, out)
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

// Two instances share one budget through a key's turn to hot: the main
// bucket they drained while the key was cold is not followed by a full
// burst from the sub-buckets, as the hand-over moves what the main bucket
// held (nothing, here) into them.
func TestSplitHandoffTwoInstances(t *testing.T) {
	t.Parallel()
	c := newClock()
	store := newStore(c)
	h1 := newLayer(t, store, c, Config{})
	h2 := newLayer(t, store, c, Config{})
	p := splitPolicy(80, 40, 8) // hot at 50 req/s on one instance
	const run = 3 * time.Second
	var admitted int64
	for tm := time.Duration(0); tm < run; tm += time.Millisecond {
		for range 3 {
			for _, h := range []*Layer{h1, h2} {
				if res := take(h, store, "acme", 1, p, c.Now()); res.Err != nil {
					t.Fatal(res.Err)
				} else if res.Allowed {
					admitted++
				}
			}
		}
		c.Add(time.Millisecond)
	}
	budget := p.Limit + p.Rate*int64(run/time.Second)
	t.Logf("admitted %d of budget %d", admitted, budget)
	if admitted > budget+2 || admitted < budget*9/10 {
		t.Fatalf("two instances admitted %d over %v, want at most the budget %d (limit + rate × elapsed) and 90%% of it", admitted, run, budget)
	}
	s1, s2 := h1.Stats(), h2.Stats()
	if s1.SplitHandoffs != 1 || s2.SplitHandoffs != 1 || s1.SplitDecisions == 0 || s2.SplitDecisions == 0 {
		t.Fatalf("stats %+v and %+v: want one hand-over each, and split decisions", s1, s2)
	}
}

// An instance that starts a hot spell (the main bucket is not held) holds
// the main bucket and brings every sub-bucket down to its share of what
// the main bucket held, also one a past spell left tokens in: together
// they hold what the main bucket held, no more. Before, a sub-bucket not
// full kept its tokens, read as in use by another instance.
func TestSplitHandoffStartsASpell(t *testing.T) {
	t.Parallel()
	c := newClock()
	store := newStore(c)
	h := newLayer(t, store, c, Config{})
	p := splitPolicy(80, 8, 8) // sub-buckets of 10, refilling 1/s
	subs := h.subPolicies(p)
	out := make([]limit.Result, 2)
	// A past spell took 3 from sub-bucket 2; the main bucket holds 12.
	store.Do(context.Background(), []limit.Request{
		{Key: subKey("acme", 2), Cost: 3, Policy: subs[2]},
		{Key: "acme", Cost: 68, Policy: p},
	}, out)
	heat(t, h, "acme", p, c.Now())
	if res := decideOne(h, "acme", 1, p); !res.Allowed {
		t.Fatalf("first split take = %+v", res)
	}
	if got := peek(t, store, "acme", p); got != 0 {
		t.Fatalf("main bucket holds %d after the hand-over, want 0", got)
	}
	// G = 12 shared as 2, 2, 2, 2, 1, 1, 1, 1; sub-bucket 2, not exactly
	// full, one less (it may hold a fraction no claim takes).
	var total int64
	for i, sp := range subs {
		got := peek(t, store, subKey("acme", i), sp)
		want := int64(1)
		if i < 4 && i != 2 {
			want = 2
		}
		total += got
		if got != want && got != want-1 { // the first take spent one somewhere
			t.Errorf("sub-bucket %d holds %d, want %d", i, got, want)
		}
	}
	if total != 12-1-1 {
		t.Errorf("sub-buckets hold %d in all, want 10", total)
	}
	// The main bucket is held: in a second nothing refilled it, though
	// its rate is 8/s.
	c.Add(time.Second - time.Millisecond)
	if got := peek(t, store, "acme", p); got != 0 {
		t.Fatalf("main bucket holds %d while held, want 0", got)
	}
	// Once per hot spell.
	decideOne(h, "acme", 1, p)
	if s := h.Stats(); s.SplitHandoffs != 1 {
		t.Fatalf("%d hand-overs, want 1", s.SplitHandoffs)
	}
}

// An instance whose hand-over finds the main bucket held joins the spell
// another instance started: it leaves the sub-buckets, in use, as they are.
func TestSplitHandoffJoinsASpell(t *testing.T) {
	t.Parallel()
	c := newClock()
	store := newStore(c)
	h := newLayer(t, store, c, Config{})
	p := splitPolicy(80, 8, 8)
	subs := h.subPolicies(p)
	out := make([]limit.Result, 2)
	store.Do(context.Background(), []limit.Request{
		{Key: subKey("acme", 2), Cost: 3, Policy: subs[2]},
		{Key: "acme", Cost: 80, Op: limit.OpClaim, Policy: p, Hold: c.Now().Add(HoldFor).UnixMicro() | 1}, // odd: the spell is ready
	}, out)
	heat(t, h, "acme", p, c.Now())
	if res := decideOne(h, "acme", 1, p); !res.Allowed {
		t.Fatalf("first split take = %+v", res)
	}
	var total int64
	for i, sp := range subs {
		total += peek(t, store, subKey("acme", i), sp)
	}
	if total != 80-3-1 {
		t.Errorf("sub-buckets hold %d in all, want 76: the joining instance must leave them", total)
	}
}

// A hand-over that cannot reach the store fails: its requests get an
// unavailable error and the key's next request tries the hand-over again
// (it does not split over sub-buckets no hand-over set, which read as
// full). With the store back, one call hands over (the main bucket is
// full: G = 80, the sub-buckets' shares, exactly full, need no claim) and
// one splits.
func TestSplitHandoffStoreDown(t *testing.T) {
	t.Parallel()
	c := newClock()
	fs := &faultStore{Store: newStore(c)}
	h := newLayer(t, fs, c, Config{})
	p := splitPolicy(80, 80, 8)
	heat(t, h, "acme", p, c.Now())
	fs.down.Store(true)
	if res := decideOne(h, "acme", 1, p); !errors.Is(res.Err, limit.ErrUnavailable) {
		t.Fatalf("split with the store down = %+v, want unavailable", res)
	}
	fs.down.Store(false)
	fs.calls.Store(0)
	if res := decideOne(h, "acme", 1, p); !res.Allowed || res.DecidedBy != limit.BySplit {
		t.Fatalf("split with the store back = %+v", res)
	}
	if n, s := fs.calls.Load(), h.Stats(); n != 2 || s.SplitHandoffs != 2 {
		t.Fatalf("%d store calls, %d hand-overs: want 2 and 2", n, s.SplitHandoffs)
	}
}

// Requests for the key wait for a hand-over in flight on this instance,
// bounded by their context, then are split.
func TestSplitHandoffWait(t *testing.T) {
	t.Parallel()
	c := newClock()
	fs := &faultStore{Store: newStore(c), gate: make(chan struct{})}
	h := newLayer(t, fs, c, Config{})
	p := splitPolicy(80, 80, 8)
	heat(t, h, "acme", p, c.Now())
	first := make(chan limit.Result)
	go func() { first <- decideOne(h, "acme", 1, p) }()
	waitFor(t, "the hand-over to be in flight", func() bool { return fs.inflight.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	out := make([]limit.Result, 1)
	h.Decide(ctx, []limit.Request{{Key: "acme", Cost: 1, Policy: p}}, out)
	if !errors.Is(out[0].Err, limit.ErrUnavailable) || !errors.Is(out[0].Err, limit.ErrOverload) {
		t.Fatalf("waiter past its deadline: %+v, want ErrOverload (and ErrUnavailable)", out[0])
	}
	second := make(chan limit.Result)
	go func() { second <- decideOne(h, "acme", 1, p) }()
	close(fs.gate)
	for _, ch := range []chan limit.Result{first, second} {
		if res := <-ch; !res.Allowed || res.DecidedBy != limit.BySplit {
			t.Fatalf("take after the hand-over = %+v", res)
		}
	}
	if s := h.Stats(); s.SplitHandoffs != 1 {
		t.Fatalf("%d hand-overs, want 1", s.SplitHandoffs)
	}
}
