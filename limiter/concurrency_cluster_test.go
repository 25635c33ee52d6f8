package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/delayproxy"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// slotLimiter is a Limiter on store whose every key has policy p.
func slotLimiter(t *testing.T, store *cluster.Store, p *limit.Policy) *Limiter {
	t.Helper()
	l, err := New(Config{Store: store, Timeout: func() time.Duration { return 100 * time.Millisecond },
		Policies: MatcherFunc(func(string) *limit.Policy { return p })})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// clusterStore is a store on addrs with a short deadline and cool-down,
// and one pipeline per node: its connection, once open, carries every
// command (a command sent on a frozen node's new connection would wait
// behind the connection's HELLO, and never run).
func clusterStore(t *testing.T, addrs []string) *cluster.Store {
	t.Helper()
	s, err := cluster.New(cluster.Config{Addrs: addrs, Timeout: 100 * time.Millisecond, BreakerCooldown: 100 * time.Millisecond, Pipelines: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// pollAcquire acquires key until an acquire is admitted by the store, for
// at most 10 s, and returns its token.
func pollAcquire(t *testing.T, l *Limiter, key, what string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, tok := l.Acquire(context.Background(), key, 0)
		if r.Err == nil && r.Allowed && r.DecidedBy == limit.ByStore {
			return tok
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no slot 10 s on: %+v", what, r)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

// Concurrency limits on a real Redis Cluster through its faults.
func TestSlotsOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{Replicas: -1, NodeTimeout: 20 * time.Second})
	ctx := context.Background()

	// An acquire that timed out under `closed` ran in Redis once the
	// primary woke up; sluice made its token, so it frees that slot: both
	// slots can be taken afterwards.
	t.Run("timed-out acquire released", func(t *testing.T) {
		store := clusterStore(t, c.Addrs())
		p := &limit.Policy{Name: "jobs", Algorithm: limit.Concurrency, Limit: 2, Period: time.Hour, OnStoreError: limit.FailClosed}
		l := slotLimiter(t, store, p)
		const key = "frozen"
		owner, err := c.PrimaryForKey(ctx, cluster.Key(key))
		if err != nil {
			t.Fatal(err)
		}
		for range 3 { // the node is known, its script loaded, its connection open
			r, tok := l.Acquire(ctx, key, 0)
			if !r.Allowed || r.DecidedBy != limit.ByStore {
				t.Fatalf("acquire before the freeze: %+v", r)
			}
			if held, err := l.Release(ctx, key, tok); !held || err != nil {
				t.Fatalf("release before the freeze: %v %v", held, err)
			}
		}
		if err := owner.Pause(); err != nil {
			t.Fatal(err)
		}
		frozen := time.Now()
		r, _ := l.Acquire(ctx, key, 0)
		time.Sleep(300*time.Millisecond - time.Since(frozen)) // the fault: a primary frozen for 300 ms
		if err := owner.Resume(); err != nil {
			t.Fatal(err)
		}
		if r.Allowed || (r.DecidedBy != limit.ByFallbackClosed && r.DecidedBy != limit.ByOverloadClosed) {
			t.Fatalf("acquire on a frozen primary: %+v, want refused by closed", r)
		}
		n, err := owner.Client().ZCard(ctx, cluster.Key(key)).Result()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("refused acquire: %s; after SIGCONT the key's set holds %d members (marker included)", r.DecidedBy, n)
		a := pollAcquire(t, l, key, "first of two")
		b := pollAcquire(t, l, key, "second of two")
		for _, tok := range []string{a, b} {
			if held, err := l.Release(ctx, key, tok); !held || err != nil {
				t.Fatalf("release: %v %v", held, err)
			}
		}
		s := l.SlotSnapshot()
		t.Logf("orphans: %d queued, %d freed, %d dropped", s.Orphans, s.OrphansFreed, s.OrphansDropped)
		if s.Orphans != 1 {
			t.Fatalf("%d orphans, want the refused acquire's", s.Orphans)
		}
	})

	// Slots taken by the local fallback while the store was cut off count
	// against the store's answer once it answers again: on one instance,
	// no more than limit are held at once.
	t.Run("fallback slots counted", func(t *testing.T) {
		pc, err := delayproxy.ProxyCluster(ctx, c, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pc.Close() })
		store := clusterStore(t, pc.Seeds())
		p := &limit.Policy{Name: "jobs", Algorithm: limit.Concurrency, Limit: 4, Period: time.Hour,
			OnStoreError: limit.FailLocal, LocalShare: 0.5}
		l := slotLimiter(t, store, p)
		const key = "cut"
		if r, _ := l.Acquire(ctx, key, 0); !r.Allowed || r.DecidedBy != limit.ByStore {
			t.Fatalf("first acquire: %+v", r)
		}
		if _, err := l.Reset(ctx, key); err != nil {
			t.Fatal(err)
		}
		pc.Cut(true)
		var byFallback []string
		for range 4 {
			if r, tok := l.Acquire(ctx, key, 0); r.Allowed {
				if r.DecidedBy != limit.ByFallbackLocal {
					t.Fatalf("acquire while cut: %+v", r)
				}
				byFallback = append(byFallback, tok)
			}
		}
		pc.Cut(false)
		if len(byFallback) != 2 {
			t.Fatalf("%d slots taken by the fallback, want 2 (local_share 0.5 of 4)", len(byFallback))
		}
		held := []string{pollAcquire(t, l, key, "first after the cut")}
		for range 4 {
			if r, tok := l.Acquire(ctx, key, 0); r.Allowed {
				held = append(held, tok)
			} else if r.Err != nil || r.DecidedBy != limit.ByStore {
				t.Fatalf("acquire after the cut: %+v", r)
			}
		}
		t.Logf("held at once: %d by the fallback + %d by the store, limit 4", len(byFallback), len(held))
		if got := len(byFallback) + len(held); got > 4 {
			t.Fatalf("%d slots held at once, limit 4", got)
		}
		// A fallback slot released frees room in the store's count.
		if ok, err := l.Release(ctx, key, byFallback[0]); !ok || err != nil {
			t.Fatalf("release of a fallback slot: %v %v", ok, err)
		}
		pollAcquire(t, l, key, "after a fallback slot's release")
		t.Logf("counters: %+v", l.SlotSnapshot())

		// Two instances, both cut off: each holds its share, and the
		// store's answers leave at most limit + (N − 1) × S = 4 + 2.
		const key2 = "cut2"
		ls := []*Limiter{slotLimiter(t, store, p), slotLimiter(t, clusterStore(t, pc.Seeds()), p)}
		for _, l := range ls {
			if r, _ := l.Acquire(ctx, key2, 0); !r.Allowed || r.DecidedBy != limit.ByStore {
				t.Fatalf("first acquire: %+v", r)
			}
		}
		if _, err := ls[0].Reset(ctx, key2); err != nil {
			t.Fatal(err)
		}
		pc.Cut(true)
		fallback := 0
		for _, l := range ls {
			for range 4 {
				if r, _ := l.Acquire(ctx, key2, 0); r.Allowed {
					fallback++
				}
			}
		}
		pc.Cut(false)
		// The first instance back takes what the store and its own share
		// leave; the other, once its store answers, what is left of that.
		stored := 1
		pollAcquire(t, ls[0], key2, "first after the cut")
		deadline := time.Now().Add(10 * time.Second)
		for _, l := range ls {
			for i := 0; i < 4; {
				r, _ := l.Acquire(ctx, key2, 0)
				if r.DecidedBy != limit.ByStore { // its breaker has not let the store in yet
					if time.Now().After(deadline) {
						t.Fatalf("no answer of the store 10 s after the cut: %+v", r)
					}
					time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
					continue
				}
				i++
				if r.Allowed {
					stored++
				}
			}
		}
		t.Logf("two instances: held at once %d by the fallbacks + %d by the store, bound 4 + (2 − 1) × 2 = 6", fallback, stored)
		if fallback != 4 || fallback+stored > 6 {
			t.Fatalf("%d by the fallbacks + %d by the store, want 4 + at most 2", fallback, stored)
		}
	})
}
