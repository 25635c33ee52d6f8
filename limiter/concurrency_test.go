package limiter

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// downSlots is a slot store that cannot answer.
type downSlots struct{ err error }

func (d downSlots) Acquire(context.Context, string, *limit.Policy, string, int64) limit.Result {
	return limit.Result{Err: d.err}
}

func (d downSlots) Release(context.Context, string, *limit.Policy, string) (bool, error) {
	return false, d.err
}

func slotPolicy(mode limit.FailMode, share float64) *limit.Policy {
	return &limit.Policy{Name: "jobs", Algorithm: limit.Concurrency, Limit: 4, Period: time.Second, OnStoreError: mode, LocalShare: share}
}

// While the store cannot answer, on_store_error decides: open admits with
// a token the fallback records without a limit, closed refuses, local holds local_share of
// the slots here (rounded down, at least one) and frees them on release.
func TestAcquireFailurePolicies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	down := &limit.UnavailableError{Node: "n", Err: errors.New("refused")}
	for _, tc := range []struct {
		mode     limit.FailMode
		share    float64
		admitted int // of 6 acquires
		by       string
	}{
		{limit.FailOpen, 1, 6, limit.ByFallbackOpen},
		{limit.FailClosed, 1, 0, limit.ByFallbackClosed},
		{limit.FailLocal, 0.5, 2, limit.ByFallbackLocal},
		{limit.FailLocal, 0.1, 1, limit.ByFallbackLocal},
	} {
		p := slotPolicy(tc.mode, tc.share)
		l, err := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: downStore{down}, Slots: downSlots{down}})
		if err != nil {
			t.Fatal(err)
		}
		var toks []string
		for range 6 {
			r, tok := l.Acquire(ctx, "k", 0)
			want := int64(4)
			if tc.mode == limit.FailLocal {
				want = int64(tc.admitted) // the share's slots, as a fallback-local RL.TAKE reports its share
			}
			if r.Err != nil || r.DecidedBy != tc.by || r.Limit != want || (tok != "") != r.Allowed {
				t.Fatalf("%s: %+v %q", tc.mode, r, tok)
			}
			if r.Allowed {
				toks = append(toks, tok)
			}
		}
		if len(toks) != tc.admitted {
			t.Fatalf("%s share %v: %d admitted, want %d", tc.mode, tc.share, len(toks), tc.admitted)
		}
		for _, tok := range toks {
			held, err := l.Release(ctx, "k", tok)
			if tc.mode == limit.FailLocal && (!held || err != nil) {
				t.Fatalf("local: release %v %v, want the fallback's slot freed", held, err)
			}
			if tc.mode == limit.FailOpen && (!held || err != nil) {
				t.Fatalf("open: release %v %v, want the fallback's record of the slot freed", held, err)
			}
		}
		if tc.mode == limit.FailLocal {
			if r, _ := l.Acquire(ctx, "k", 0); !r.Allowed {
				t.Fatalf("local after releases: %+v", r)
			}
		}
	}
}

// The rate commands refuse a concurrency policy, and the slot commands a
// rate policy, naming the command, the policy and what to use instead.
func TestWrongAlgorithm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cp := slotPolicy(limit.FailClosed, 1)
	rp := &limit.Policy{Name: "api", Limit: 5, Rate: 5, Period: time.Second, OnStoreError: limit.FailClosed}
	l, err := New(Config{Policies: MatcherFunc(func(k string) *limit.Policy {
		if k == "jobs" {
			return cp
		}
		return rp
	}), Store: local.New(local.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	reqs := []limit.Request{{Key: "jobs", Cost: 1}, {Key: "api", Cost: 1}, {Key: "jobs", Cost: 1, Op: limit.OpPeek}}
	out := make([]limit.Result, 3)
	l.Decide(ctx, reqs, out)
	if out[0].Err == nil || out[0].Err.Error() != "rl.take does not apply to concurrency policy 'jobs': use RL.ACQUIRE and RL.RELEASE" || !errors.Is(out[0].Err, limit.ErrWrongAlgorithm) {
		t.Fatalf("take: %v", out[0].Err)
	}
	if out[1].Err != nil || !out[1].Allowed || out[2].Err == nil {
		t.Fatalf("the rest of the batch: %+v %+v", out[1], out[2])
	}
	if _, err := l.MTake(ctx, []limit.Request{{Key: "api", Cost: 1}, {Key: "jobs", Cost: 1}}, make([]limit.Result, 2)); !errors.Is(err, limit.ErrWrongAlgorithm) {
		t.Fatalf("mtake: %v", err)
	}
	if r, _ := l.Acquire(ctx, "api", 0); r.Err == nil || r.Err.Error() != "rl.acquire does not apply to token_bucket policy 'api': use RL.TAKE" {
		t.Fatalf("acquire: %v", r.Err)
	}
	if _, err := l.Release(ctx, "api", "t"); !errors.Is(err, limit.ErrWrongAlgorithm) {
		t.Fatalf("release: %v", err)
	}
	r, tok := l.Acquire(ctx, "jobs", 0)
	if !r.Allowed || r.DecidedBy != limit.ByEmbedded || len(tok) != 2*limit.TokenBytes {
		t.Fatalf("acquire: %+v %q", r, tok)
	}
	if r, _ := l.Acquire(ctx, "jobs", limit.MaxSlotTTL.Milliseconds()+1); !errors.Is(r.Err, ErrSlotTTL) {
		t.Fatalf("ttl above the cap: %+v", r)
	}
	if existed, err := l.Reset(ctx, "jobs"); !existed || err != nil {
		t.Fatalf("reset: %v %v", existed, err)
	}
	if held, _ := l.Release(ctx, "jobs", tok); held {
		t.Fatal("a slot survived RL.RESET")
	}
	s := l.SlotSnapshot()
	if s.Acquires != 1 || s.Acquired != 1 || s.Releases != 1 || s.Released != 0 {
		t.Fatalf("counters %+v", s)
	}
}

// A shadow policy admits what it would refuse, with a token that holds
// nothing.
func TestAcquireShadow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := slotPolicy(limit.FailClosed, 1)
	p.Limit, p.Shadow = 1, true
	l, err := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: local.New(local.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := l.Acquire(ctx, "k", 0)
	second, tok := l.Acquire(ctx, "k", 0)
	if !first.Allowed || first.DecidedBy != limit.ByEmbedded || !second.Allowed || second.DecidedBy != limit.ByShadow || tok == "" {
		t.Fatalf("%+v, %+v %q", first, second, tok)
	}
	if held, _ := l.Release(ctx, "k", tok); held {
		t.Fatal("the shadow token held a slot")
	}
}

// An overloaded store sends an acquire to on_overload: by default the
// policy's on_store_error, but local for open.
func TestAcquireOverload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	over := &limit.OverloadError{Node: "n", Wait: time.Second, Left: time.Millisecond}
	for _, tc := range []struct {
		onStore, onOverload limit.FailMode
		by                  string
	}{
		{limit.FailOpen, "", limit.ByOverloadLocal},
		{limit.FailClosed, "", limit.ByOverloadClosed},
		{limit.FailClosed, limit.FailOpen, limit.ByOverloadOpen},
	} {
		p := slotPolicy(tc.onStore, 0.5)
		p.OnOverload = tc.onOverload
		l, err := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: downStore{over}, Slots: downSlots{over}})
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := l.Acquire(ctx, "k", 0); r.Err != nil || r.DecidedBy != tc.by {
			t.Fatalf("%s/%s: %+v, want %s", tc.onStore, tc.onOverload, r, tc.by)
		}
	}
}

// flakySlots is an in-process slot store that can be made unreachable,
// standing for Redis.
type flakySlots struct {
	*local.Store
	down atomic.Bool
}

func (f *flakySlots) Acquire(ctx context.Context, key string, p *limit.Policy, token string, ttlMs int64) limit.Result {
	if f.down.Load() {
		return limit.Result{Err: &limit.UnavailableError{Node: "n", Err: errors.New("refused")}}
	}
	r := f.Store.Acquire(ctx, key, p, token, ttlMs)
	r.DecidedBy = limit.ByStore
	return r
}

func (f *flakySlots) Release(ctx context.Context, key string, p *limit.Policy, token string) (bool, error) {
	if f.down.Load() {
		return false, &limit.UnavailableError{Node: "n", Err: errors.New("refused")}
	}
	return f.Store.Release(ctx, key, p, token)
}

// The slots `open` admitted while the store could not answer count
// against the store's answers once it answers again, until released or
// expired: six admitted on a limit of four leave no room, and after three
// releases one.
func TestOpenSlotsCountAfterRecovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := slotPolicy(limit.FailOpen, 1)
	store := &flakySlots{Store: local.New(local.Config{})}
	store.down.Store(true)
	l, err := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: downStore{}, Slots: store})
	if err != nil {
		t.Fatal(err)
	}
	var open []string
	for range 6 {
		r, tok := l.Acquire(ctx, "k", 0)
		if !r.Allowed || r.DecidedBy != limit.ByFallbackOpen {
			t.Fatalf("while down: %+v", r)
		}
		open = append(open, tok)
	}
	store.down.Store(false)
	if r, _ := l.Acquire(ctx, "k", 0); r.Allowed || r.DecidedBy != limit.ByStore || r.Remaining != 0 || r.RetryAfterMs < 1 {
		t.Fatalf("back, with 6 open slots held: %+v, want refused", r)
	}
	waitOrphans(t, l)
	for _, tok := range open[:3] {
		if held, err := l.Release(ctx, "k", tok); !held || err != nil {
			t.Fatalf("release of an open slot: %v %v", held, err)
		}
	}
	if r, _ := l.Acquire(ctx, "k", 0); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("3 open slots held: %+v, want the fourth slot", r)
	}
	if r, _ := l.Acquire(ctx, "k", 0); r.Allowed {
		t.Fatalf("3 open + 1 store held: %+v, want refused", r)
	}
	// Orphans: the 6 acquires that failed (they may have run) and the 2
	// the store admitted past the open slots.
	if s := l.SlotSnapshot(); s.OverFallback != 2 || s.Orphans != 8 {
		t.Fatalf("counters %+v, want 2 store admissions refused, 8 orphans", s)
	}
}

// waitOrphans waits, at most 10 s, until l has released every orphan.
func waitOrphans(t *testing.T, l *Limiter) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !l.orphans.idle() {
		if time.Now().After(deadline) {
			t.Fatalf("%d orphans still pending after 10 s", l.orphans.pending())
		}
		time.Sleep(time.Millisecond) // polling interval, not synchronisation
	}
}

// An RL.RELEASE the store could not answer is an error, and the slot is
// released in the background once the store answers again: the limit's
// one slot can be taken then, long before its hour is up.
func TestReleaseRetriedAfterOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := slotPolicy(limit.FailClosed, 1)
	p.Limit, p.Period = 1, time.Hour
	store := &flakySlots{Store: local.New(local.Config{})}
	l, err := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: downStore{}, Slots: store})
	if err != nil {
		t.Fatal(err)
	}
	r, tok := l.Acquire(ctx, "k", 0)
	if !r.Allowed || r.DecidedBy != limit.ByStore {
		t.Fatalf("acquire: %+v", r)
	}
	store.down.Store(true)
	if held, err := l.Release(ctx, "k", tok); held || !errors.Is(err, limit.ErrUnavailable) {
		t.Fatalf("release while down: %v %v, want the store's error", held, err)
	}
	store.down.Store(false)
	waitOrphans(t, l)
	if r, _ := l.Acquire(ctx, "k", 0); !r.Allowed {
		t.Fatalf("after the store came back: %+v, want the slot freed by the background release", r)
	}
}

// An overload turned away before it was sent took no slot: nothing to
// release. One that ran out of time after it was sent may have run: its
// token is released in the background.
func TestAcquireOrphanOnlyIfSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		left    time.Duration
		orphans int64
	}{{time.Millisecond, 0}, {0, 1}} {
		over := &limit.OverloadError{Node: "n", Wait: time.Second, Left: tc.left}
		p := slotPolicy(limit.FailClosed, 1)
		l, err := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: downStore{over}, Slots: downSlots{over}})
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := l.Acquire(ctx, "k", 0); r.Allowed || r.DecidedBy != limit.ByOverloadClosed {
			t.Fatalf("left %v: %+v", tc.left, r)
		}
		if got := l.SlotSnapshot().Orphans; got != tc.orphans {
			t.Fatalf("left %v: %d orphans, want %d", tc.left, got, tc.orphans)
		}
	}
}
