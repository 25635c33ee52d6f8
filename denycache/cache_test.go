package denycache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// clock is a fake clock, safe for concurrent use, started on a whole
// second.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Unix(1_700_000_000, 0).UnixNano())
	return c
}

func (c *clock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// newStore returns the in-process store on clock c: the store whose
// refusals the tests cache.
func newStore(c *clock) *local.Store { return local.New(local.Config{Now: c.Now}) }

func newCache(t testing.TB, cfg Config) *Cache {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// storeDo decides one request of cost for key on store.
func storeDo(t testing.TB, store limit.Store, key string, p *limit.Policy, cost int64, op limit.Op) limit.Result {
	t.Helper()
	out := make([]limit.Result, 1)
	store.Do(context.Background(), []limit.Request{{Key: key, Cost: cost, Op: op, Policy: p}}, out)
	if out[0].Err != nil {
		t.Fatal(out[0].Err)
	}
	return out[0]
}

// TestDenyAnswersRefusal: a refusal is answered for cost >= the refused
// cost, counting down, for at most MaxTTL, and not for a smaller cost.
func TestDenyAnswersRefusal(t *testing.T) {
	c := newClock()
	store := newStore(c)
	d := newCache(t, Config{MaxTTL: 10 * time.Second})
	p := &limit.Policy{Name: "p", Limit: 4, Rate: 2, Period: time.Minute, OnStoreError: limit.FailClosed}
	storeDo(t, store, "k", p, 3, limit.OpTake) // 1 left
	r := storeDo(t, store, "k", p, 2, limit.OpTake)
	if r.Allowed || r.RetryAfterMs != 30000 {
		t.Fatalf("refusal = %+v, want retry 30000", r)
	}
	d.Refused("k", p, 2, &r, c.Now(), d.Gen())

	c.Add(4 * time.Second)
	got, ok := d.Lookup("k", p, 2, c.Now())
	want := limit.Result{Limit: 4, Remaining: 1, RetryAfterMs: 25999, ResetAfterMs: 85999, DecidedBy: limit.ByDenyCache}
	if !ok || got != want {
		t.Fatalf("Lookup cost 2 = %+v %v, want %+v", got, ok, want)
	}
	if got, ok := d.Lookup("k", p, 3, c.Now()); !ok || got.RetryAfterMs != 25999+30000 {
		t.Fatalf("Lookup cost 3 = %+v %v, want retry %d", got, ok, 25999+30000)
	}
	if got, ok := d.Lookup("k", p, 1, c.Now()); ok {
		t.Fatalf("a smaller cost is answered: %+v (the store admits it)", got)
	}
	if got, ok := d.Lookup("k", &limit.Policy{Name: "p", Limit: 4, Rate: 2, Period: time.Minute}, 2, c.Now()); ok {
		t.Fatalf("another policy pointer is answered: %+v", got)
	}
	c.Add(6 * time.Second) // 10s: MaxTTL
	if got, ok := d.Lookup("k", p, 2, c.Now()); ok {
		t.Fatalf("answered past MaxTTL: %+v", got)
	}
	if s := d.Stats(); s.Hits != 2 || s.Added != 1 || s.Entries != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

// TestDenyPermanent: a refusal of cost > limit (retry -1) is answered with
// retry -1 for MaxTTL; a refusal of retry 1 ms is not kept.
func TestDenyPermanent(t *testing.T) {
	c := newClock()
	d := newCache(t, Config{})
	p := &limit.Policy{Name: "p", Limit: 4, Rate: 2, Period: time.Minute}
	d.Refused("k", p, 5, &limit.Result{Limit: 4, Remaining: 4, RetryAfterMs: -1}, c.Now(), d.Gen())
	c.Add(DefaultTTL - time.Nanosecond)
	if got, ok := d.Lookup("k", p, 6, c.Now()); !ok || got.RetryAfterMs != -1 || got.Allowed {
		t.Fatalf("Lookup = %+v %v, want a refusal with retry -1", got, ok)
	}
	if _, ok := d.Lookup("k", p, 4, c.Now()); ok {
		t.Fatal("cost 4 <= limit answered from a cost-5 refusal")
	}
	c.Add(time.Nanosecond)
	if _, ok := d.Lookup("k", p, 6, c.Now()); ok {
		t.Fatal("answered past MaxTTL")
	}
	d.Refused("j", p, 1, &limit.Result{Limit: 4, RetryAfterMs: 1}, c.Now(), d.Gen())
	if _, ok := d.Lookup("j", p, 1, c.Now()); ok {
		t.Fatal("a refusal of retry 1 ms is answered")
	}
}

// TestDenyForget: Forget drops the key's refusal, and a refusal whose
// request was sent before a Forget is not kept (it may predate a reset).
func TestDenyForget(t *testing.T) {
	c := newClock()
	d := newCache(t, Config{})
	p := &limit.Policy{Name: "p", Limit: 4, Rate: 2, Period: time.Minute}
	refusal := &limit.Result{Limit: 4, RetryAfterMs: 30000}
	d.Refused("k", p, 1, refusal, c.Now(), d.Gen())
	if _, ok := d.Lookup("k", p, 1, c.Now()); !ok {
		t.Fatal("not answered")
	}
	d.Forget("k", p)
	if _, ok := d.Lookup("k", p, 1, c.Now()); ok {
		t.Fatal("answered after Forget")
	}
	gen := d.Gen()
	d.Forget("k", p) // an RL.RESET or a give-back of k while the request was in flight
	d.Refused("k", p, 1, refusal, c.Now(), gen)
	if _, ok := d.Lookup("k", p, 1, c.Now()); ok {
		t.Fatal("a refusal sent before a Forget of its key was kept")
	}
}

// TestDenyForgetOtherKeyInFlight: a Forget of one key while refusals of
// others are in flight keeps none of them out of the cache (one client's
// give-backs in a loop used to keep the cache empty for every tenant),
// whatever the number of Forgets of other keys in flight below the ring;
// past it, and for the key forgotten, the refusal is not kept.
func TestDenyForgetOtherKeyInFlight(t *testing.T) {
	c := newClock()
	p := &limit.Policy{Name: "p", Limit: 4, Rate: 2, Period: time.Minute}
	refusal := &limit.Result{Limit: 4, RetryAfterMs: 30000}
	for _, tc := range []struct {
		name    string
		forgets int  // Forgets of keys a0, a1, … in flight
		self    bool // and one of the refused key among them
		kept    bool
	}{
		{"one other key", 1, false, true},
		{"a ring of other keys", forgetRing - 1, false, true},
		{"more than the ring", forgetRing, false, false},
		{"its own key among others", 50, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newCache(t, Config{})
			gen := d.Gen()
			for i := range tc.forgets {
				d.Forget(fmt.Sprint("a", i), p)
				if tc.self && i == tc.forgets/2 {
					d.Forget("b", p)
				}
			}
			d.Refused("b", p, 1, refusal, c.Now(), gen)
			if _, ok := d.Lookup("b", p, 1, c.Now()); ok != tc.kept {
				t.Fatalf("b's refusal kept %v after %d Forgets in flight (its own among them: %v), want %v", ok, tc.forgets, tc.self, tc.kept)
			}
		})
	}
}

// TestDenyClear: Clear drops every refusal, and one whose request was
// sent before it is not kept.
func TestDenyClear(t *testing.T) {
	c := newClock()
	d := newCache(t, Config{})
	p := &limit.Policy{Name: "p", Limit: 4, Rate: 2, Period: time.Minute}
	refusal := &limit.Result{Limit: 4, RetryAfterMs: 30000}
	gen := d.Gen()
	d.Refused("k", p, 1, refusal, c.Now(), gen)
	d.Clear()
	if _, ok := d.Lookup("k", p, 1, c.Now()); ok || d.Stats().Entries != 0 {
		t.Fatalf("answered after Clear (%d entries)", d.Stats().Entries)
	}
	d.Refused("j", p, 1, refusal, c.Now(), gen)
	if _, ok := d.Lookup("j", p, 1, c.Now()); ok {
		t.Fatal("a refusal sent before Clear was kept")
	}
}

// TestDenyBounded: the entries never exceed Size, whatever the keys.
func TestDenyBounded(t *testing.T) {
	c := newClock()
	d := newCache(t, Config{Size: 64})
	p := &limit.Policy{Name: "p", Limit: 4, Rate: 2, Period: time.Minute}
	for i := range 10_000 {
		d.Refused(fmt.Sprint("k", i), p, 1, &limit.Result{Limit: 4, RetryAfterMs: 30000}, c.Now(), d.Gen())
	}
	if s := d.Stats(); s.Entries > 64 || s.Entries < 16 || s.Added != 10_000 {
		t.Fatalf("stats = %+v, want at most 64 entries", s)
	}
}

// TestDenyNeverRefusesWhatStoreAdmits replays random takes of random
// costs at random times, for every algorithm, against the store on the
// same clock: every request the cache answers, the store (asked with a
// peek at that instant) refuses too, with the same limit and a
// retry_after and reset_after no shorter than the cache's (takes admitted
// since the refusal make the store's longer); when the store admitted
// nothing of the key since, at most 1 ms longer.
func TestDenyNeverRefusesWhatStoreAdmits(t *testing.T) {
	for _, algo := range limit.Algorithms {
		t.Run(string(algo), func(t *testing.T) {
			t.Parallel()
			c := newClock()
			store := newStore(c)
			d := newCache(t, Config{MaxTTL: time.Hour})
			p := &limit.Policy{Name: "p", Algorithm: algo, Limit: 5, Rate: 5, Period: 10 * time.Second, OnStoreError: limit.FailClosed}
			rng := rand.New(rand.NewPCG(1, uint64(len(algo))))
			clean := map[string]bool{} // nothing admitted since the key's refusal was cached
			hits := 0
			for i := range 20_000 {
				c.Add(time.Duration(rng.Int64N(int64(700 * time.Millisecond))))
				key := fmt.Sprint("k", rng.IntN(3))
				cost := 1 + rng.Int64N(p.Limit+1)
				if got, ok := d.Lookup(key, p, cost, c.Now()); ok {
					hits++
					st := storeDo(t, store, key, p, cost, limit.OpPeek)
					slack := int64(1 << 62)
					if clean[key] {
						slack = 1
					}
					if st.Allowed || got.Allowed || st.Limit != got.Limit || got.RetryAfterMs == 0 || got.Remaining >= cost ||
						(st.RetryAfterMs < 0) != (got.RetryAfterMs < 0) || st.RetryAfterMs < got.RetryAfterMs || st.RetryAfterMs > got.RetryAfterMs+slack ||
						st.ResetAfterMs < got.ResetAfterMs || st.ResetAfterMs > got.ResetAfterMs+slack {
						t.Fatalf("step %d: %s cost %d (clean %v): cache %+v, store %+v", i, key, cost, clean[key], got, st)
					}
					continue
				}
				gen := d.Gen()
				if r := storeDo(t, store, key, p, cost, limit.OpTake); !r.Allowed {
					d.Refused(key, p, cost, &r, c.Now(), gen)
					clean[key] = true
				} else {
					clean[key] = false
				}
			}
			if hits < 1000 {
				t.Fatalf("%d hits: the test did not exercise the cache", hits)
			}
			t.Logf("%d of 20000 answered by the cache", hits)
		})
	}
}

// TestDenyRoundedRetry: the store rounds retry_after up (334 ms for a
// token every 333.3 ms) and admits before it: the cache has stopped
// answering by then.
func TestDenyRoundedRetry(t *testing.T) {
	c := newClock()
	store := newStore(c)
	d := newCache(t, Config{})
	p := &limit.Policy{Name: "p", Limit: 1, Rate: 3, Period: time.Second, OnStoreError: limit.FailClosed}
	storeDo(t, store, "k", p, 1, limit.OpTake)
	r := storeDo(t, store, "k", p, 1, limit.OpTake)
	if r.Allowed || r.RetryAfterMs != 334 {
		t.Fatalf("refusal = %+v, want retry 334", r)
	}
	d.Refused("k", p, 1, &r, c.Now(), d.Gen())
	c.Add(333*time.Millisecond + 500*time.Microsecond)
	if st := storeDo(t, store, "k", p, 1, limit.OpPeek); !st.Allowed {
		t.Fatalf("store at 333.5 ms: %+v, want allowed", st)
	}
	if got, ok := d.Lookup("k", p, 1, c.Now()); ok {
		t.Fatalf("cache at 333.5 ms answers %+v; the store admits", got)
	}
}

// TestDenyForgetRace: one goroutine records refusals of k, each decided
// at a version of k's state (its remaining field), while another gives k
// back (a new version, then Forget) and a third forgets other keys. Once
// the refusal that was in flight during a give-back has been recorded, any
// refusal of k held was decided at that version or later: none decided
// before a give-back of its key survives it.
func TestDenyForgetRace(t *testing.T) {
	t.Parallel()
	c := newClock()
	p := &limit.Policy{Name: "p", Limit: 4, Rate: 2, Period: time.Minute}
	d := newCache(t, Config{MaxTTL: time.Hour})
	var version, done atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			gen := d.Gen()
			v := version.Load() // the store's decision
			runtime.Gosched()   // its reply on the way back
			d.Refused("k", p, 1, &limit.Result{Limit: 4, Remaining: v, RetryAfterMs: 30000}, c.Now(), gen)
			done.Add(1)
		}
	})
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			d.Forget(fmt.Sprint("other", i%7), p)
			runtime.Gosched()
		}
	})
	kept := 0
	for range 5000 {
		v := version.Add(1)
		d.Forget("k", p)
		// The refusal in flight now may have been decided before v; the
		// next one was decided after it, and is kept.
		for step := range 2 {
			for a := done.Load(); done.Load() == a; {
				runtime.Gosched()
			}
			r, ok := d.Lookup("k", p, 1, c.Now())
			if ok && r.Remaining < v {
				stop.Store(true)
				wg.Wait()
				t.Fatalf("a refusal decided at version %d is held after the give-back of version %d", r.Remaining, v)
			}
			if ok && step == 1 {
				kept++
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("after %d of 5000 give-backs the next refusal of k was held", kept)
	if kept == 0 {
		t.Fatal("no refusal was ever kept: the test did not exercise the cache")
	}
}
