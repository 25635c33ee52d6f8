package limiter

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/denycache"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// seenStore is the in-process store posing as the shared one (decided_by
// store), counting the requests that reach it; down fails them all. It is
// not limit.Atomic: an RL.MTAKE over two keys takes each apart, and gives
// back.
type seenStore struct {
	st   *local.Store
	seen atomic.Int64
	down atomic.Bool
}

func (s *seenStore) Reset(ctx context.Context, key string, p *limit.Policy) (bool, error) {
	return s.st.Reset(ctx, key, p)
}
func (s *seenStore) Close() error { return nil }

func (s *seenStore) Do(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	s.seen.Add(int64(len(reqs)))
	if s.down.Load() {
		downStore{&limit.UnavailableError{Node: "n1", Err: context.DeadlineExceeded}}.Do(ctx, reqs, out)
		return
	}
	s.st.Do(ctx, reqs, out)
}

func newDenyLimiter(t *testing.T, p *limit.Policy) (*Limiter, *seenStore) {
	t.Helper()
	s := &seenStore{st: local.New(local.Config{DecidedBy: limit.ByStore})}
	d, err := denycache.New(denycache.Config{MaxTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: s, Deny: d})
	if err != nil {
		t.Fatal(err)
	}
	return l, s
}

// TestDenyCacheAnswers: once the store refused a key, its next takes are
// refused here, decided_by deny-cache, counted in the stats, without
// reaching the store; another key still goes there.
func TestDenyCacheAnswers(t *testing.T) {
	t.Parallel()
	p := &limit.Policy{Name: "p", Limit: 2, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed}
	l, s := newDenyLimiter(t, p)
	take(t, l, "k", "k")
	if r := take(t, l, "k")[0]; r.Allowed || r.DecidedBy != limit.ByStore {
		t.Fatalf("third take = %+v, want a refusal by the store", r)
	}
	before := s.seen.Load()
	for i := range 10 {
		r := take(t, l, "k", fmt.Sprint("other", i))
		if r[0].Allowed || r[0].DecidedBy != limit.ByDenyCache || r[0].RetryAfterMs < 1 || r[0].Limit != 2 {
			t.Fatalf("cached take = %+v", r[0])
		}
		if r[1].DecidedBy != limit.ByStore {
			t.Fatalf("other key = %+v, want the store", r[1])
		}
	}
	if got := s.seen.Load() - before; got != 10 {
		t.Fatalf("the store saw %d requests, want 10 (only the other key)", got)
	}
	if got := l.Snapshot().ByPath[limit.ByDenyCache]; got != 10 {
		t.Fatalf("decided_by deny-cache counted %d, want 10", got)
	}
}

// TestDenyCacheNotFor: shadow, deny_cache: false, global policies and the
// refusals of the failure policy never enter the cache.
func TestDenyCacheNotFor(t *testing.T) {
	t.Parallel()
	base := limit.Policy{Name: "p", Limit: 1, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed}
	shadow, off, global := base, base, base
	shadow.Shadow, off.NoDenyCache, global.Scope = true, true, limit.ScopeGlobal
	for name, p := range map[string]*limit.Policy{"shadow": &shadow, "deny_cache false": &off, "global": &global} {
		l, s := newDenyLimiter(t, p)
		take(t, l, "k", "k", "k")
		if r := take(t, l, "k")[0]; r.DecidedBy == limit.ByDenyCache || s.seen.Load() != 4 {
			t.Errorf("%s: %+v, and the store saw %d of 4 requests", name, r, s.seen.Load())
		}
	}
	l, s := newDenyLimiter(t, &base)
	s.down.Store(true)
	take(t, l, "k", "k") // fallback-closed refusals
	s.down.Store(false)
	if r := take(t, l, "k")[0]; !r.Allowed || r.DecidedBy != limit.ByStore {
		t.Fatalf("after fallback-closed refusals: %+v, want the store's admission", r)
	}
}

// TestDenyCacheReset: RL.RESET forgets the key's refusal on this
// instance, and the next take goes to the store, which admits it.
func TestDenyCacheReset(t *testing.T) {
	t.Parallel()
	p := &limit.Policy{Name: "p", Limit: 1, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed}
	l, _ := newDenyLimiter(t, p)
	take(t, l, "k", "k")
	if r := take(t, l, "k")[0]; r.DecidedBy != limit.ByDenyCache {
		t.Fatalf("before the reset: %+v, want deny-cache", r)
	}
	if _, err := l.Reset(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if r := take(t, l, "k")[0]; !r.Allowed || r.DecidedBy != limit.ByStore {
		t.Fatalf("after the reset: %+v, want the store's admission", r)
	}
}

// TestDenyCacheRefund: the refund of a refused RL.MTAKE forgets the
// refusals of the keys it gives back to (the refund may return tokens
// taken before the refusal, so the store may admit what it refused).
func TestDenyCacheRefund(t *testing.T) {
	t.Parallel()
	p := &limit.Policy{Name: "p", Limit: 2, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed}
	l, _ := newDenyLimiter(t, p)
	take(t, l, "a", "b", "b") // a: 1 left; b: none
	reqs := []limit.Request{{Key: "a", Cost: 2}}
	out := make([]limit.Result, 1)
	for _, want := range []string{limit.ByStore, limit.ByDenyCache} {
		l.Decide(context.Background(), reqs, out)
		if out[0].Allowed || out[0].DecidedBy != want {
			t.Fatalf("a cost 2 = %+v, want refused by %s", out[0], want)
		}
	}
	reqs = []limit.Request{{Key: "a", Cost: 1}, {Key: "b", Cost: 1}}
	out = make([]limit.Result, 2)
	if ok, err := l.MTake(context.Background(), reqs, out); ok || err != nil || l.Snapshot().Refunds != 1 {
		t.Fatalf("MTAKE = %v %v (refunds %d), want refused with a given back", ok, err, l.Snapshot().Refunds)
	}
	reqs = []limit.Request{{Key: "a", Cost: 2}}
	out = make([]limit.Result, 1)
	l.Decide(context.Background(), reqs, out)
	if out[0].DecidedBy != limit.ByStore {
		t.Fatalf("a cost 2 after the refund = %+v, want the store's decision", out[0])
	}
}
