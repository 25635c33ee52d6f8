package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

const denyConfig = `defaults:
  on_store_error: closed
  limit: 5
  period: 1m
policies:
  - {name: tb, match: "tb:*", algorithm: token_bucket, rate: 5}
  - {name: gc, match: "gc:*", algorithm: gcra, rate: 5}
  - {name: sw, match: "sw:*", algorithm: sliding_window}
  - {name: fw, match: "fw:*", algorithm: fixed_window}
  - {name: off, match: "off:*", rate: 5, deny_cache: false}
  - {name: dark, match: "dark:*", rate: 5, shadow: true}
  - {name: rest, match: "*", rate: 5}
`

// mustTake is take, failing the test on an error.
func mustTake(t *testing.T, c *redis.Client, key string, cost int64) reply {
	t.Helper()
	r, err := take(t.Context(), c, key, cost)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDenyCacheOnCluster runs two sluice processes on one real Redis
// Cluster: a key the store refused is refused by the instance that saw it
// without a round trip (decided_by deny-cache), for every algorithm, while
// the store, asked through the other instance with RL.MTAKE (which never
// reads the cache, and spends nothing when it refuses), refuses it too;
// RL.RESET and an RL.MTAKE refund on that instance clear its entry; an
// RL.RESET on the other instance does not, and no request sent more than
// the 1 s cap after the store's refusal is answered from the cache (the
// documented bound); an
// RL.POLICY SET or DEL leaves nothing cached under the old policy; and two
// instances hammering one key admit no more than the bound.
func TestDenyCacheOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	args := []string{"--config", writeConfig(t, denyConfig), "--cluster", strings.Join(c.Addrs(), ",")}
	a, b := startSluice(t, args...).client(t), startSluice(t, args...).client(t)
	ctx := t.Context()

	t.Run("answered locally, refused by the store too", func(t *testing.T) {
		for _, prefix := range []string{"tb", "gc", "sw", "fw"} {
			key := prefix + ":abuser"
			for i := range 5 {
				if r := mustTake(t, a, key, 1); !r.Allowed {
					t.Fatalf("%s take %d: %+v", key, i, r)
				}
			}
			first := mustTake(t, a, key, 1)
			if first.Allowed || first.DecidedBy != "store" || first.Retry < 1 {
				t.Fatalf("%s sixth take: %+v, want refused by the store", key, first)
			}
			storeBefore := infoOf(t, a, "decided_by_store")
			for i := range 50 {
				r := mustTake(t, a, key, 1)
				if r.Allowed || r.DecidedBy != "deny-cache" || r.Retry < 1 || r.Retry > first.Retry || r.Limit != 5 || r.Remaining != 0 {
					t.Fatalf("%s cached take %d: %+v (first refusal %+v)", key, i, r, first)
				}
				ok, rules, err := mtake(ctx, b, key, 1)
				if err != nil || ok || rules[0].Allowed || rules[0].DecidedBy != "store" {
					t.Fatalf("%s: the store through the other instance: %v %+v %v, want refused", key, ok, rules, err)
				}
			}
			if got := infoOf(t, a, "decided_by_store") - storeBefore; got != 0 {
				t.Fatalf("%s: %d decisions reached the store while the cache answered", key, got)
			}
		}
		if hits := infoOf(t, a, "deny_cache_hits"); hits < 200 {
			t.Fatalf("deny_cache_hits %d, want at least 200", hits)
		}
	})

	t.Run("not for deny_cache false or shadow", func(t *testing.T) {
		for _, key := range []string{"off:k", "dark:k"} {
			for i := range 10 {
				if r := mustTake(t, a, key, 1); r.DecidedBy == "deny-cache" {
					t.Fatalf("%s take %d: %+v", key, i, r)
				}
			}
		}
	})

	t.Run("RL.RESET clears this instance only", func(t *testing.T) {
		key := "tb:reset"
		for range 6 {
			mustTake(t, a, key, 1)
		}
		if r := mustTake(t, a, key, 1); r.DecidedBy != "deny-cache" {
			t.Fatalf("before: %+v", r)
		}
		if err := b.Do(ctx, "RL.RESET", key).Err(); err != nil {
			t.Fatal(err)
		}
		// The store is fresh; a still refuses from its cache (the bound:
		// min(retry, 1s)), and the tokens wait for whoever asks the store.
		if r := mustTake(t, a, key, 1); r.DecidedBy != "deny-cache" {
			t.Fatalf("after a reset on the other instance: %+v, want deny-cache (the entry is this instance's)", r)
		}
		if err := a.Do(ctx, "RL.RESET", key).Err(); err != nil {
			t.Fatal(err)
		}
		if r := mustTake(t, a, key, 1); !r.Allowed || r.DecidedBy != "store" {
			t.Fatalf("after a reset on this instance: %+v, want admitted by the store", r)
		}
	})

	t.Run("after an RL.RESET on the other instance: refused at most 1 s more", func(t *testing.T) {
		key := "tb:reset-bound"
		for range 5 {
			mustTake(t, a, key, 1)
		}
		// The entry is made when the store's refusal comes back: no later
		// than firstRecv. It lives min(retry − 1 ms, 1 s) = 1 s here
		// (retry is 12 s), so no request sent after firstRecv + 1 s may be
		// answered from it.
		first := mustTake(t, a, key, 1)
		firstRecv := time.Now()
		if first.Allowed || first.DecidedBy != "store" || first.Retry < 1000 {
			t.Fatalf("sixth take: %+v, want refused by the store with a retry over 1 s", first)
		}
		if err := b.Do(ctx, "RL.RESET", key).Err(); err != nil {
			t.Fatal(err)
		}
		cached := 0
		for {
			sent := time.Now()
			r := mustTake(t, a, key, 1)
			if r.DecidedBy != "deny-cache" {
				if !r.Allowed || r.DecidedBy != "store" {
					t.Fatalf("after the entry: %+v, want admitted by the reset store", r)
				}
				break
			}
			cached++
			if late := sent.Sub(firstRecv); late > time.Second {
				t.Fatalf("a request sent %s after the store's refusal was answered from the cache (cap 1 s): %+v", late, r)
			}
			if cached > 100000 {
				t.Fatal("the cache never let go")
			}
			time.Sleep(5 * time.Millisecond) // pacing a bounded poll, not synchronisation
		}
		if cached == 0 {
			t.Fatal("no request was answered from the cache after the reset: the bound was not exercised")
		}
		t.Logf("%d refusals from the cache after the other instance's reset, then the store admitted", cached)
	})

	t.Run("an RL.MTAKE refund clears the key's entry", func(t *testing.T) {
		key, other := "tb:refund", "tb:spent"
		if cluster.Slot(cluster.Key(key)) == cluster.Slot(cluster.Key(other)) {
			t.Fatal("the keys must be on different slots")
		}
		mustTake(t, a, key, 4) // 1 left
		for range 5 {
			mustTake(t, a, other, 1)
		}
		for _, want := range []string{"store", "deny-cache"} {
			if r := mustTake(t, a, key, 2); r.Allowed || r.DecidedBy != want {
				t.Fatalf("cost 2: %+v, want refused by %s", r, want)
			}
		}
		if ok, rules, err := mtake(ctx, a, key, 1, other, 1); err != nil || ok || !rules[0].Allowed {
			t.Fatalf("MTAKE: %v %+v %v, want refused by %s only", ok, rules, err, other)
		}
		if r := mustTake(t, a, key, 2); r.DecidedBy != "store" {
			t.Fatalf("cost 2 after the refund: %+v, want the store's decision", r)
		}
	})

	t.Run("a policy change leaves no refusal cached under the old one", func(t *testing.T) {
		key := "tb:pol"
		for range 6 {
			mustTake(t, a, key, 1)
		}
		if r := mustTake(t, a, key, 1); r.DecidedBy != "deny-cache" {
			t.Fatalf("before: %+v", r)
		}
		if err := a.Do(ctx, "RL.POLICY", "SET", "pol", `{"match": "tb:pol", "limit": 50, "rate": 5, "period": "1m", "on_store_error": "closed"}`).Err(); err != nil {
			t.Fatal(err)
		}
		// The store keeps what was spent under the new numbers (a converted
		// state): it decides, and refuses; the cache did not answer.
		if r := mustTake(t, a, key, 1); r.Limit != 50 || r.DecidedBy != "store" {
			t.Fatalf("after RL.POLICY SET: %+v, want the store's decision under limit 50", r)
		}
		if err := a.Do(ctx, "RL.POLICY", "DEL", "pol").Err(); err != nil {
			t.Fatal(err)
		}
		if r := mustTake(t, a, key, 1); r.Limit != 5 || r.DecidedBy != "store" {
			t.Fatalf("after RL.POLICY DEL: %+v, want the store's decision under limit 5", r)
		}
	})

	t.Run("two instances, 16 in flight, one key: within the bound", func(t *testing.T) {
		key := "tb:flood"
		var admitted atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for w := range 16 {
			cl := a
			if w%2 == 1 {
				cl = b
			}
			wg.Go(func() {
				for range 500 {
					r, err := take(ctx, cl, key, 1)
					if err != nil {
						t.Error(err)
						return
					}
					if r.Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		bound := 5 + int64(5*elapsed/time.Minute) + 1 // limit + rate × T, and the token being refilled
		if got := admitted.Load(); got > bound || got < 5 {
			t.Fatalf("admitted %d of 8000 in %s, bound %d", got, elapsed, bound)
		}
		t.Logf("admitted %d of 8000 in %s; deny_cache_hits a=%d b=%d", admitted.Load(), elapsed, infoOf(t, a, "deny_cache_hits"), infoOf(t, b, "deny_cache_hits"))
	})
}

// infoOf reads one integer field of the sluice's INFO sluice section.
func infoOf(t *testing.T, c *redis.Client, field string) int64 {
	t.Helper()
	v, err := infoCount(context.Background(), c, "sluice", field)
	if err != nil {
		t.Fatal(fmt.Errorf("INFO %s: %w", field, err))
	}
	return v
}
