package hotkey

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

func leasePolicy(lim, rate int64, period time.Duration) *limit.Policy {
	return &limit.Policy{Name: "api", Limit: lim, Rate: rate, Period: period,
		Hot: limit.Hot{Mode: limit.HotLease, Threshold: 50}}
}

// Two instances share one bucket through leases: together they admit what
// the bucket allows, no more and not much less, and neither starves.
func TestLeaseTwoInstances(t *testing.T) {
	t.Parallel()
	c := newClock()
	store := newStore(c)
	a := newLayer(t, store, c, Config{})
	b := newLayer(t, store, c, Config{})
	p := leasePolicy(100, 1000, time.Second)
	rng := rand.New(rand.NewPCG(1, 2))
	const step = 100 * time.Microsecond
	const run = 2 * time.Second
	var got [2]int64
	var decided [2]map[string]int
	decided[0], decided[1] = map[string]int{}, map[string]int{}
	for tm := time.Duration(0); tm < run; tm += step {
		// A sees 20,000 req/s, B 10,000 req/s, in random order.
		order := []int{0, 0, 1}
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, who := range order {
			h := []*Layer{a, b}[who]
			res := take(h, store, "acme", 1, p, c.Now())
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if !res.Allowed && res.RetryAfterMs < 1 {
				t.Fatalf("rejected with retry_after %d", res.RetryAfterMs)
			}
			if res.Allowed {
				got[who]++
			}
			decided[who][res.DecidedBy]++
		}
		c.Add(step)
	}
	total := got[0] + got[1]
	bound := p.Limit + p.Rate*int64(run/p.Period)
	t.Logf("admitted A %d, B %d, total %d of %d; A by %v, B by %v; A %+v", got[0], got[1], total, bound, decided[0], decided[1], a.Stats())
	if total > bound {
		t.Fatalf("admitted %d, more than limit + rate × elapsed = %d", total, bound)
	}
	if total < bound*9/10 {
		t.Fatalf("admitted %d, less than 90%% of %d", total, bound)
	}
	for who, n := range got {
		if n < total/5 {
			t.Fatalf("instance %d got %d of %d: starved", who, n, total)
		}
	}
	if decided[0][limit.ByLease] == 0 || decided[1][limit.ByLease] == 0 {
		t.Fatal("no decisions by lease")
	}
	// Most decisions made no round trip.
	s := a.Stats()
	if s.Claims*5 > s.LeaseHits+s.LeaseRejects {
		t.Fatalf("%d claims for %d lease decisions", s.Claims, s.LeaseHits+s.LeaseRejects)
	}
}

// Demand below the bucket's rate is admitted in full through leases.
func TestLeaseAdmitsAllUnderTheRate(t *testing.T) {
	t.Parallel()
	c := newClock()
	store := newStore(c)
	a := newLayer(t, store, c, Config{})
	b := newLayer(t, store, c, Config{})
	p := leasePolicy(100, 1000, time.Second)
	for tm := time.Duration(0); tm < 2*time.Second; tm += time.Millisecond {
		// 500 req/s each, 1000 req/s together: exactly the rate.
		if tm%(2*time.Millisecond) == 0 {
			for _, h := range []*Layer{a, b} {
				if res := take(h, store, "acme", 1, p, c.Now()); !res.Allowed {
					t.Fatalf("at %v: rejected %+v", tm, res)
				}
			}
		}
		c.Add(time.Millisecond)
	}
	if a.Stats().LeaseHits == 0 || b.Stats().LeaseHits == 0 {
		t.Fatal("no lease hits")
	}
}

// heat makes key hot on h under p, at 1000 req/s: its block is then
// min(100, limit/16) tokens with the default lease TTL.
func heat(t *testing.T, h *Layer, key string, p *limit.Policy, now time.Time) {
	t.Helper()
	hot := false
	for range 1000 {
		hot = h.Observe(key, p, now)
	}
	if !hot {
		t.Fatal("key never turned hot")
	}
}

func decideOne(h *Layer, key string, cost int64, p *limit.Policy) limit.Result {
	out := make([]limit.Result, 1)
	h.Decide(context.Background(), []limit.Request{{Key: key, Cost: cost, Policy: p}}, out)
	return out[0]
}

func TestLeaseReply(t *testing.T) {
	t.Parallel()
	c := newClock()
	store := newStore(c)
	h := newLayer(t, store, c, Config{})
	p := leasePolicy(160, 10, time.Second) // block bound 160/16 = 10
	heat(t, h, "acme", p, c.Now())
	res := decideOne(h, "acme", 1, p)
	want := limit.Result{Allowed: true, Limit: 160, Remaining: 159, RetryAfterMs: -1, ResetAfterMs: 100, DecidedBy: limit.ByLease}
	if res != want {
		t.Fatalf("first lease decision = %+v, want %+v", res, want)
	}
	if got := peek(t, store, "acme", p); got != 150 {
		t.Fatalf("bucket holds %d after a claim of 10, want 150", got)
	}
	for range 149 {
		decideOne(h, "acme", 1, p)
	}
	// 150 spent, 10 held, then the bucket is empty.
	for i := range 10 {
		if res := decideOne(h, "acme", 1, p); !res.Allowed {
			t.Fatalf("take %d of the last 10: rejected", i)
		}
	}
	res = decideOne(h, "acme", 1, p)
	if res.Allowed || res.RetryAfterMs != 100 || res.Remaining != 0 || res.DecidedBy != limit.ByLease {
		t.Fatalf("take from an empty bucket = %+v, want rejected, retry 100ms, by lease", res)
	}
	res = decideOne(h, "acme", 3, p)
	if res.Allowed || res.RetryAfterMs != 300 {
		t.Fatalf("take 3 from an empty bucket = %+v, want retry 300ms", res)
	}
	claims := h.Stats().Claims
	c.Add(40 * time.Millisecond)
	res = decideOne(h, "acme", 1, p)
	if res.Allowed || res.RetryAfterMs != 60 {
		t.Fatalf("40ms later = %+v, want retry 60ms", res)
	}
	if got := h.Stats().Claims; got != claims {
		t.Fatalf("%d claims while the bucket was known empty, want none", got-claims)
	}
	// cost > limit goes to the store.
	if res = decideOne(h, "acme", 161, p); res.Allowed || res.RetryAfterMs != -1 || res.DecidedBy != limit.ByEmbedded {
		t.Fatalf("cost > limit = %+v, want the store's rejection, retry -1", res)
	}
}

func TestLeaseReturnedOnExpiryAndClose(t *testing.T) {
	t.Parallel()
	c := newClock()
	store := newStore(c)
	h, err := New(Config{Store: store, Now: c.Now, LeaseTTL: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p := leasePolicy(160, 1, time.Hour) // no refill to speak of
	heat(t, h, "a", p, c.Now())
	heat(t, h, "b", p, c.Now())
	decideOne(h, "a", 1, p)
	if got := peek(t, store, "a", p); got != 150 {
		t.Fatalf("bucket a holds %d after a claim, want 150", got)
	}
	c.Add(30 * time.Millisecond)
	waitFor(t, "the expired lease to be returned", func() bool { return peek(t, store, "a", p) == 159 })

	decideOne(h, "b", 1, p)
	if got := peek(t, store, "b", p); got != 150 {
		t.Fatalf("bucket b holds %d after a claim, want 150", got)
	}
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := peek(t, store, "b", p); got != 159 {
		t.Fatalf("bucket b holds %d after Close, want 159", got)
	}
	s := h.Stats()
	if s.Returns != 2 || s.TokensReturned != 18 || s.Claims != 2 || s.TokensClaimed != 20 {
		t.Fatalf("stats %+v, want 2 claims of 20 tokens, 2 returns of 18", s)
	}
	// After Close requests go to the store.
	if res := decideOne(h, "b", 1, p); res.DecidedBy != limit.ByEmbedded || !res.Allowed {
		t.Fatalf("after Close: %+v, want the store's answer", res)
	}
}

// A lease that is never used again goes back whole: the bucket is full.
func TestLeaseUnusedBucketFullAfterClose(t *testing.T) {
	t.Parallel()
	c := newClock()
	store := newStore(c)
	h := newLayer(t, store, c, Config{})
	p := leasePolicy(160, 1, time.Hour)
	heat(t, h, "k", p, c.Now())
	// The store answers the claim, then a rejection by cost > held.
	out := make([]limit.Result, 1)
	h.Decide(context.Background(), []limit.Request{{Key: "k", Cost: 1, Policy: p}}, out)
	store.Do(context.Background(), []limit.Request{{Key: "k", Cost: 1, Op: limit.OpReturn, Policy: p}}, out)
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := peek(t, store, "k", p); got != p.Limit {
		t.Fatalf("bucket holds %d after Close, want full (%d)", got, p.Limit)
	}
}

func TestLeaseStoreFailure(t *testing.T) {
	t.Parallel()
	c := newClock()
	fs := &faultStore{Store: newStore(c)}
	h := newLayer(t, fs, c, Config{})
	p := leasePolicy(160, 10, time.Second)
	heat(t, h, "acme", p, c.Now())
	if res := decideOne(h, "acme", 1, p); !res.Allowed {
		t.Fatalf("first take: %+v", res)
	}
	fs.down.Store(true)
	calls := fs.calls.Load()
	for i := range 9 {
		if res := decideOne(h, "acme", 1, p); !res.Allowed || res.DecidedBy != limit.ByLease {
			t.Fatalf("take %d from held tokens with the store down: %+v", i, res)
		}
	}
	if n := fs.calls.Load() - calls; n != 0 {
		t.Fatalf("%d store calls while tokens were held", n)
	}
	res := decideOne(h, "acme", 1, p)
	if !errors.Is(res.Err, limit.ErrUnavailable) {
		t.Fatalf("take after the lease ran out with the store down: %+v, want ErrUnavailable", res)
	}
	fs.down.Store(false)
	if res := decideOne(h, "acme", 1, p); !res.Allowed {
		t.Fatalf("take after the store came back: %+v", res)
	}
}

// Many goroutines on one hot key: one claim in flight at a time, and the
// tokens admitted plus the tokens returned are exactly the bucket.
func TestLeaseConcurrent(t *testing.T) {
	t.Parallel()
	c := newClock()
	fs := &faultStore{Store: newStore(c)}
	h, err := New(Config{Store: fs, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	p := leasePolicy(1000, 1, time.Hour)
	heat(t, h, "acme", p, c.Now())
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := int64(0)
	for g := range 16 {
		wg.Go(func() {
			n := int64(0)
			for i := range 200 {
				cost := int64(1 + (g+i)%3)
				out := make([]limit.Result, 2)
				reqs := []limit.Request{{Key: "acme", Cost: cost, Policy: p}, {Key: "acme", Cost: 1, Policy: p}}
				h.Decide(context.Background(), reqs, out)
				for j, r := range out {
					if r.Err != nil {
						t.Error(r.Err)
						return
					}
					if r.Allowed {
						n += reqs[j].Cost
					} else if r.RetryAfterMs < 1 {
						t.Errorf("rejected with retry_after %d", r.RetryAfterMs)
					}
				}
			}
			mu.Lock()
			admitted += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if m := fs.maxIn.Load(); m > 1 {
		t.Fatalf("%d claims in flight at once for one key, want 1", m)
	}
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	left := peek(t, fs, "acme", p)
	if admitted+left != p.Limit {
		t.Fatalf("admitted %d + left %d = %d, want the limit %d", admitted, left, admitted+left, p.Limit)
	}
	if admitted < p.Limit-3 {
		t.Fatalf("admitted %d of %d: the lease under-admits", admitted, p.Limit)
	}
}

// Waiters for a claim in flight give up with the context and report the
// store as overloaded (so unavailable too): it was asked and has not
// answered in time.
func TestLeaseWaitBoundedByContext(t *testing.T) {
	t.Parallel()
	c := newClock()
	fs := &faultStore{Store: newStore(c), gate: make(chan struct{})}
	h := newLayer(t, fs, c, Config{})
	p := leasePolicy(160, 10, time.Second)
	heat(t, h, "acme", p, c.Now())
	done := make(chan limit.Result)
	go func() { done <- decideOne(h, "acme", 1, p) }()
	waitFor(t, "the claim to be in flight", func() bool { return fs.inflight.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	out := make([]limit.Result, 1)
	h.Decide(ctx, []limit.Request{{Key: "acme", Cost: 1, Policy: p}}, out)
	if !errors.Is(out[0].Err, limit.ErrUnavailable) || !errors.Is(out[0].Err, limit.ErrOverload) || !errors.Is(out[0].Err, context.DeadlineExceeded) {
		t.Fatalf("waiter past its deadline: %+v, want ErrOverload (and ErrUnavailable)", out[0])
	}
	close(fs.gate)
	if res := <-done; !res.Allowed {
		t.Fatalf("claimer: %+v", res)
	}
}

// A batch mixing lease claims, split takes and pass-through requests makes
// one store call.
func TestDecideMixedBatchOneCall(t *testing.T) {
	t.Parallel()
	c := newClock()
	fs := &faultStore{Store: newStore(c)}
	h := newLayer(t, fs, c, Config{})
	lp, sp := leasePolicy(160, 10, time.Second), splitPolicy(80, 80, 8)
	heat(t, h, "l", lp, c.Now())
	heat(t, h, "s", sp, c.Now())
	// The first split decision hands the budget over (its own calls).
	if res := decideOne(h, "s", 1, sp); !res.Allowed || res.DecidedBy != limit.BySplit {
		t.Fatalf("first split take = %+v", res)
	}
	fs.calls.Store(0)
	reqs := []limit.Request{
		{Key: "l", Cost: 1, Policy: lp},
		{Key: "s", Cost: 1, Policy: sp},
		{Key: "l", Cost: 1, Op: limit.OpPeek, Policy: lp},
		{Key: "l", Cost: 1, Policy: lp},
		{Key: "x", Cost: 1},
	}
	out := make([]limit.Result, len(reqs))
	h.Decide(context.Background(), reqs, out)
	if n := fs.calls.Load(); n != 1 {
		t.Fatalf("%d store calls, want 1", n)
	}
	want := []string{limit.ByLease, limit.BySplit, limit.ByEmbedded, limit.ByLease}
	for i, by := range want {
		if !out[i].Allowed || out[i].DecidedBy != by {
			t.Errorf("out[%d] = %+v, want admitted by %s", i, out[i], by)
		}
	}
	if !errors.Is(out[4].Err, limit.ErrNoPolicy) {
		t.Errorf("request without a policy: %+v, want ErrNoPolicy", out[4])
	}
}

// Close waits for a claim in flight, then gives its tokens back.
func TestCloseWaitsForClaims(t *testing.T) {
	t.Parallel()
	c := newClock()
	fs := &faultStore{Store: newStore(c), gate: make(chan struct{})}
	h, err := New(Config{Store: fs, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	p := leasePolicy(160, 1, time.Hour)
	heat(t, h, "acme", p, c.Now())
	took := make(chan limit.Result)
	go func() { took <- decideOne(h, "acme", 1, p) }()
	waitFor(t, "the claim to be in flight", func() bool { return fs.inflight.Load() == 1 })
	closed := make(chan error)
	go func() { closed <- h.Close(context.Background()) }()
	waitFor(t, "Close to begin", func() bool { return h.closed.Load() })
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with a claim in flight", err)
	default:
	}
	close(fs.gate)
	if res := <-took; !res.Allowed {
		t.Fatalf("take: %+v", res)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if got := peek(t, fs, "acme", p); got != 159 {
		t.Fatalf("bucket holds %d after Close, want 159", got)
	}
}

// The default lease (limit.Policy.DefaultHot) starts where a block holds
// two tokens: below it a claim takes one, one store call per admission.
func TestMinDefaultLeaseLimit(t *testing.T) {
	if got, want := int64(limit.MinDefaultLeaseLimit), int64(2*MaxBlockDivisor); got != want {
		t.Errorf("limit.MinDefaultLeaseLimit = %d, want 2 × MaxBlockDivisor = %d", got, want)
	}
	p := &limit.Policy{Limit: limit.MinDefaultLeaseLimit}
	if got := max(1, p.Limit/MaxBlockDivisor); got != 2 {
		t.Errorf("block bound at limit %d = %d, want 2", p.Limit, got)
	}
}
