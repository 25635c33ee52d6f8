package limiter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/hotkey"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// adjust sends one RL.ADJUST of delta on key.
func adjust(t *testing.T, l *Limiter, key string, delta int64) limit.Result {
	t.Helper()
	out := make([]limit.Result, 1)
	l.Decide(context.Background(), []limit.Request{{Key: key, Cost: delta, Op: limit.OpAdjust}}, out)
	return out[0]
}

// takeReceipt sends RL.TAKE key cost RECEIPT.
func takeReceipt(t *testing.T, l *Limiter, key string, cost int64) limit.Result {
	t.Helper()
	out := make([]limit.Result, 1)
	l.Decide(context.Background(), []limit.Request{{Key: key, Cost: cost, WantReceipt: true}}, out)
	return out[0]
}

// giveBack sends RL.ADJUST key delta receipt.
func giveBack(t *testing.T, l *Limiter, key string, delta int64, receipt string) limit.Result {
	t.Helper()
	out := make([]limit.Result, 1)
	l.Decide(context.Background(), []limit.Request{{Key: key, Cost: delta, Op: limit.OpAdjust, Receipt: receipt}}, out)
	return out[0]
}

// A give-back drops the key's refusal from the deny cache: the next take
// goes to the store and is admitted; a spend does not.
func TestAdjustForgetsDenyCache(t *testing.T) {
	t.Parallel()
	p := &limit.Policy{Name: "p", Limit: 2, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed}
	l, _ := newDenyLimiter(t, p)
	rc := takeReceipt(t, l, "k", 2).Receipt
	take(t, l, "k") // refused by the store: cached
	if r := take(t, l, "k")[0]; r.DecidedBy != limit.ByDenyCache {
		t.Fatalf("take = %+v, want the deny cache", r)
	}
	if r := adjust(t, l, "k", 1); r.Err != nil || !r.Allowed || r.Remaining != 0 || r.DecidedBy != limit.ByStore {
		t.Fatalf("adjust +1 = %+v", r)
	}
	if r := take(t, l, "k")[0]; r.DecidedBy != limit.ByDenyCache {
		t.Fatalf("take after a spend = %+v, want the deny cache still", r)
	}
	if r := adjust(t, l, "k", -2); r.Err != limit.ErrReceiptMissing {
		t.Fatalf("adjust -2 without a receipt = %+v, want %v", r, limit.ErrReceiptMissing)
	}
	if r := take(t, l, "k")[0]; r.DecidedBy != limit.ByDenyCache {
		t.Fatalf("take after a refused give-back = %+v, want the deny cache still", r)
	}
	if r := giveBack(t, l, "k", -2, rc); r.Err != nil || r.Remaining != 1 {
		t.Fatalf("adjust -2 = %+v, want 1 left (1 of the 2 paid the debt)", r)
	}
	if r := take(t, l, "k")[0]; !r.Allowed || r.DecidedBy != limit.ByStore {
		t.Fatalf("take after the give-back = %+v, want admitted by the store", r)
	}
	if s := l.Snapshot(); s.Adjusts != 2 || s.AdjustSpent != 1 || s.AdjustReturned != 2 {
		t.Fatalf("adjust counters %+v", s)
	}
}

// leasedViral is a limiter whose key "viral" (policy api, 100 at 1 an
// hour, leased when hot) has gone the lease way, its store and policy.
func leasedViral(t *testing.T) (*Limiter, *local.Store, *limit.Policy) {
	t.Helper()
	store := local.New(local.Config{DecidedBy: limit.ByStore})
	hot, err := hotkey.New(hotkey.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hot.Close(context.Background()) })
	p := &limit.Policy{Name: "api", Limit: 100, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed,
		Hot: limit.Hot{Mode: limit.HotLease, Threshold: 5}}
	l, err := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: store, Hot: hot})
	if err != nil {
		t.Fatal(err)
	}
	leased := false
	for range 50 {
		if take(t, l, "viral")[0].DecidedBy == limit.ByLease {
			leased = true
		}
	}
	if !leased {
		t.Fatal("the key never went the lease way")
	}
	return l, store, p
}

// A hot (leased) key's adjust goes to its main bucket in the store, and is
// not counted as traffic of the key.
func TestAdjustHotKeyMainBucket(t *testing.T) {
	t.Parallel()
	l, store, p := leasedViral(t)
	// Everything the lease has not claimed yet, and more: the main bucket
	// is in debt, and a lease can claim nothing more from it.
	if r := adjust(t, l, "viral", 200); r.Err != nil || r.DecidedBy != limit.ByStore || r.Remaining != 0 {
		t.Fatalf("adjust of a hot key = %+v, want the store's main bucket", r)
	}
	peek := make([]limit.Result, 1)
	store.Do(context.Background(), []limit.Request{{Key: "viral", Cost: 1, Op: limit.OpPeek, Policy: p}}, peek)
	if peek[0].Allowed || peek[0].RetryAfterMs <= 0 {
		t.Fatalf("main bucket after the adjust = %+v, want refused", peek[0])
	}
}

// When the store cannot answer: local adjusts the fallback bucket, open
// and closed record nothing and say so; shadow applies it and says shadow.
// A give-back records nothing in any mode (its receipt is in the store),
// and a take answered by a fallback carries no receipt.
func TestAdjustStoreErrorAndShadow(t *testing.T) {
	t.Parallel()
	unavailable := &limit.UnavailableError{Node: "n1", Err: context.DeadlineExceeded}
	for _, tc := range []struct {
		mode    limit.FailMode
		allowed bool
		left    int64
		by      string
	}{
		{limit.FailLocal, true, 0, limit.ByFallbackLocal},
		{limit.FailOpen, true, 10, limit.ByFallbackOpen},
		{limit.FailClosed, false, 0, limit.ByFallbackClosed},
	} {
		l, err := New(Config{Policies: policyFor(tc.mode, 1), Store: downStore{unavailable}})
		if err != nil {
			t.Fatal(err)
		}
		if r := adjust(t, l, "k", 12); r.Err != nil || r.Allowed != tc.allowed || r.Remaining != tc.left || r.DecidedBy != tc.by {
			t.Errorf("%s: adjust +12 = %+v", tc.mode, r)
		}
		if tc.mode == limit.FailLocal {
			if r := take(t, l, "k")[0]; r.Allowed {
				t.Errorf("local: take after a debt = %+v, want refused", r)
			}
			if r := adjust(t, l, "k", -5); r.Err != limit.ErrReceiptMissing {
				t.Errorf("local: adjust -5 without a receipt = %+v, want %v", r, limit.ErrReceiptMissing)
			}
		}
		if r := giveBack(t, l, "k", -5, limit.NewReceipt()); r.Err != nil || r.Allowed || r.DecidedBy != tc.by {
			t.Errorf("%s: give-back = %+v, want nothing recorded, decided_by %s", tc.mode, r, tc.by)
		}
		if s := l.Snapshot(); s.AdjustReturned != 0 {
			t.Errorf("%s: %d tokens counted as given back by a fallback that gave back nothing", tc.mode, s.AdjustReturned)
		}
		if tc.mode == limit.FailLocal {
			if r := take(t, l, "k")[0]; r.Allowed {
				t.Errorf("local: take after a give-back in fallback = %+v, want refused (nothing given back)", r)
			}
		}
		if r := takeReceipt(t, l, "fresh", 1); r.Receipt != "" || r.DecidedBy != tc.by {
			t.Errorf("%s: take with a receipt = %+v, want no receipt", tc.mode, r)
		}
	}
	p := &limit.Policy{Name: "dark", Limit: 5, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed, Shadow: true}
	l, err := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: local.New(local.Config{DecidedBy: limit.ByStore})})
	if err != nil {
		t.Fatal(err)
	}
	if r := adjust(t, l, "k", 9); !r.Allowed || r.Remaining != 0 || r.DecidedBy != limit.ByShadow {
		t.Fatalf("shadow adjust = %+v", r)
	}
	if r := take(t, l, "k")[0]; !r.Allowed || r.DecidedBy != limit.ByShadow || r.Remaining != 0 {
		t.Fatalf("shadow take in debt = %+v, want admitted in shadow with 0 left", r)
	}
}

// A global policy refuses RL.ADJUST, in a batch beside requests that are
// decided.
func TestAdjustGlobalRefused(t *testing.T) {
	t.Parallel()
	g := &limit.Policy{Name: "g", Limit: 5, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed, Scope: limit.ScopeGlobal}
	r := &limit.Policy{Name: "r", Limit: 5, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed}
	l, err := New(Config{Policies: MatcherFunc(func(k string) *limit.Policy {
		if k == "g" {
			return g
		}
		return r
	}), Store: local.New(local.Config{DecidedBy: limit.ByStore})})
	if err != nil {
		t.Fatal(err)
	}
	reqs := []limit.Request{{Key: "g", Cost: -1, Op: limit.OpAdjust}, {Key: "r", Cost: 2, Op: limit.OpAdjust}, {Key: "g", Cost: 1}}
	out := make([]limit.Result, len(reqs))
	l.Decide(context.Background(), reqs, out)
	if out[0].Err == nil || out[1].Err != nil || out[1].Remaining != 3 || out[2].Err != nil {
		t.Fatalf("batch = %+v", out)
	}
}

// A take that asks for a receipt skips the hot-key path, so its receipt
// is recorded with its take on the main bucket, and the give-back goes
// there too; the key's other takes still go the lease way.
func TestReceiptSkipsHotPath(t *testing.T) {
	t.Parallel()
	l, store, p := leasedViral(t)
	r := takeReceipt(t, l, "viral", 3)
	if !r.Allowed || r.DecidedBy != limit.ByStore || !limit.ValidReceipt(r.Receipt) {
		t.Fatalf("a take with a receipt on a hot key = %+v, want the store's, with a receipt", r)
	}
	before := make([]limit.Result, 1)
	store.Do(context.Background(), []limit.Request{{Key: "viral", Cost: 1, Op: limit.OpPeek, Policy: p}}, before)
	if g := giveBack(t, l, "viral", -3, r.Receipt); g.Err != nil || g.DecidedBy != limit.ByStore || g.Remaining != before[0].Remaining+3 {
		t.Fatalf("give-back = %+v, want the main bucket's %d + 3", g, before[0].Remaining)
	}
	if take(t, l, "viral")[0].DecidedBy != limit.ByLease {
		t.Fatal("a plain take after the receipt's left the lease way")
	}
}

// A global policy's take carries no receipt (its pool is the region's),
// nor does a take of cost 0; a malformed receipt is refused before the
// store.
func TestReceiptNone(t *testing.T) {
	t.Parallel()
	g := &limit.Policy{Name: "g", Limit: 5, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed, Scope: limit.ScopeGlobal}
	r := &limit.Policy{Name: "r", Limit: 5, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed}
	l, err := New(Config{Policies: MatcherFunc(func(k string) *limit.Policy {
		if k == "g" {
			return g
		}
		return r
	}), Store: local.New(local.Config{DecidedBy: limit.ByStore})})
	if err != nil {
		t.Fatal(err)
	}
	if res := takeReceipt(t, l, "g", 1); res.Err != nil || res.Receipt != "" {
		t.Errorf("global take = %+v, want no receipt", res)
	}
	if res := takeReceipt(t, l, "r", 0); res.Err != nil || !res.Allowed || res.Receipt != "" {
		t.Errorf("take of 0 = %+v, want admitted, no receipt", res)
	}
	if res := giveBack(t, l, "r", -1, "ZZ"); res.Err != limit.ErrReceiptInvalid {
		t.Errorf("give-back with a malformed receipt = %+v", res)
	}
}

// TestReceiptBoundToUser: the store records a receipt under an id bound to
// the taker's user (limit.BindReceipt), never the receipt the client sees;
// another user's give-back of it names no take and changes nothing, its
// own user's gives back.
func TestReceiptBoundToUser(t *testing.T) {
	t.Parallel()
	p := &limit.Policy{Name: "p", Limit: 5, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed}
	st := local.New(local.Config{DecidedBy: limit.ByStore})
	l, err := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	decide := func(r limit.Request) limit.Result {
		out := make([]limit.Result, 1)
		l.Decide(ctx, []limit.Request{r}, out)
		return out[0]
	}
	take := decide(limit.Request{Key: "k", Cost: 3, WantReceipt: true, User: "acme"})
	if !take.Allowed || !limit.ValidReceipt(take.Receipt) {
		t.Fatalf("acme's take with a receipt = %+v", take)
	}
	// The store knows only the bound id: a give-back straight to it by the
	// receipt the client saw is unknown.
	raw := make([]limit.Result, 1)
	st.Do(ctx, []limit.Request{{Key: "k", Cost: -3, Op: limit.OpAdjust, Policy: p, Receipt: take.Receipt}}, raw)
	if !errors.Is(raw[0].Err, limit.ErrReceipt) {
		t.Fatalf("the store took the shown receipt itself: %+v", raw[0])
	}
	for _, user := range []string{"beta", "", "acme2"} {
		if g := decide(limit.Request{Key: "k", Cost: -3, Op: limit.OpAdjust, Receipt: take.Receipt, User: user}); !errors.Is(g.Err, limit.ErrReceipt) {
			t.Fatalf("user %q gave back acme's receipt: %+v", user, g)
		}
	}
	if g := decide(limit.Request{Key: "k", Cost: -3, Op: limit.OpAdjust, Receipt: take.Receipt, User: "acme"}); g.Err != nil || !g.Allowed || g.Remaining != 5 {
		t.Fatalf("acme's own give-back after the others' = %+v, want applied, 5 left", g)
	}
}
