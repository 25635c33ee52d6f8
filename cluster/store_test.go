package cluster

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

func newStore(t *testing.T, addrs []string) *Store {
	t.Helper()
	s, err := New(Config{Addrs: addrs, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func takeN(ctx context.Context, s *Store, p *limit.Policy, keys ...string) []limit.Result {
	reqs := make([]limit.Request, len(keys))
	for i, k := range keys {
		reqs[i] = limit.Request{Key: k, Cost: 1, Policy: p}
	}
	out := make([]limit.Result, len(keys))
	s.Do(ctx, reqs, out)
	return out
}

func TestClusterStore(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	s := newStore(t, c.Addrs())
	ctx := context.Background()

	t.Run("keys land on the slot of their tag", func(t *testing.T) {
		keys := []string{"acme", "{acme}:login", "x{}y", "ü-ñ", strings.Repeat("k", 1024),
			"}{acme}", "{{a}}", "{}", "}", "a{}b{c}", "{a", "a{b"}
		var tenants []string
		for i := range 20 {
			tenants = append(tenants, "tenant}"+strconv.Itoa(i), "a{}b"+strconv.Itoa(i))
		}
		slots := map[int64]bool{}
		for i, k := range append(keys, tenants...) {
			want, err := c.Nodes()[0].Client().ClusterKeySlot(ctx, Key(k)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := Slot(Key(k)); int64(got) != want {
				t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT = %d", Key(k), got, want)
			}
			if i >= len(keys) {
				slots[want] = true
			}
		}
		// 40 keys with a '}' and no usable tag: on one or two slots they
		// would be a hot shard made by the key layout.
		if len(slots) < 30 {
			t.Errorf("%d keys without a well-formed tag on %d slots (CLUSTER KEYSLOT)", len(tenants), len(slots))
		}
		if Slot(Key("{acme}:login")) != Slot(Key("acme")) {
			t.Error("a user hash tag must be kept")
		}
	})

	t.Run("a batch across every node", func(t *testing.T) {
		p := &limit.Policy{Limit: 3, Rate: 1, Period: time.Hour}
		keys := make([]string, 300)
		nodes := map[int]bool{}
		for i := range keys {
			keys[i] = "batch:" + strconv.Itoa(i)
			nodes[Slot(Key(keys[i]))*3/16384] = true
		}
		if len(nodes) != 3 {
			t.Fatalf("keys cover %d thirds of the slots, want 3", len(nodes))
		}
		for round, want := range []int64{2, 1, 0} {
			for i, r := range takeN(ctx, s, p, keys...) {
				if r.Err != nil || !r.Allowed || r.Remaining != want || r.DecidedBy != limit.ByStore {
					t.Fatalf("round %d key %d: %+v", round, i, r)
				}
			}
		}
		for i, r := range takeN(ctx, s, p, keys...) {
			if r.Err != nil || r.Allowed || r.RetryAfterMs < 1 {
				t.Fatalf("key %d after draining: %+v", i, r)
			}
		}
	})

	t.Run("every key gets a TTL", func(t *testing.T) {
		p := &limit.Policy{Limit: 10, Rate: 10, Period: time.Second}
		takeN(ctx, s, p, "ttl:a")
		owner, err := c.PrimaryForKey(ctx, Key("ttl:a"))
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := owner.Client().PTTL(ctx, Key("ttl:a")).Result()
		if err != nil {
			t.Fatal(err)
		}
		// one token to refill (100 ms) plus the one-second margin
		if ttl <= 0 || ttl > 1100*time.Millisecond {
			t.Fatalf("PTTL %v, want (0, 1.1s]", ttl)
		}
	})

	t.Run("the race: 20 concurrent takes with 5 tokens left admit exactly 5", func(t *testing.T) {
		p := &limit.Policy{Limit: 100, Rate: 1, Period: time.Hour}
		reqs := []limit.Request{{Key: "race", Cost: 95, Policy: p}}
		out := make([]limit.Result, 1)
		s.Do(ctx, reqs, out)
		if !out[0].Allowed || out[0].Remaining != 5 {
			t.Fatalf("setup: %+v", out[0])
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		admitted := 0
		for range 20 {
			wg.Go(func() {
				r := takeN(ctx, s, p, "race")[0]
				if r.Err != nil {
					t.Error(r.Err)
				}
				if r.Allowed {
					mu.Lock()
					admitted++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if admitted != 5 {
			t.Fatalf("admitted %d, want exactly 5", admitted)
		}
	})

	t.Run("NOSCRIPT after SCRIPT FLUSH is reloaded, not an error", func(t *testing.T) {
		p := &limit.Policy{Limit: 1000, Rate: 1000, Period: time.Second}
		keys := []string{"ns:1", "ns:2", "ns:3", "ns:4", "ns:5", "ns:6"}
		for round := range 3 {
			if err := c.ScriptFlushAll(ctx); err != nil {
				t.Fatal(err)
			}
			for i, r := range takeN(ctx, s, p, keys...) {
				if r.Err != nil || !r.Allowed {
					t.Fatalf("round %d key %d: %+v", round, i, r)
				}
			}
		}
	})

	t.Run("reset", func(t *testing.T) {
		p := &limit.Policy{Limit: 1, Rate: 1, Period: time.Hour}
		takeN(ctx, s, p, "reset:k")
		if ok, err := s.Reset(ctx, "reset:k", p); err != nil || !ok {
			t.Fatalf("reset = %v, %v", ok, err)
		}
		if ok, err := s.Reset(ctx, "reset:k", p); err != nil || ok {
			t.Fatalf("second reset = %v, %v", ok, err)
		}
		if r := takeN(ctx, s, p, "reset:k")[0]; !r.Allowed {
			t.Fatalf("after reset: %+v", r)
		}
	})

	t.Run("WRONGTYPE is an error, not a fallback", func(t *testing.T) {
		p := &limit.Policy{Limit: 1, Rate: 1, Period: time.Hour}
		owner, err := c.PrimaryForKey(ctx, Key("wrongtype"))
		if err != nil {
			t.Fatal(err)
		}
		if err := owner.Client().Set(ctx, Key("wrongtype"), "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		r := takeN(ctx, s, p, "wrongtype")[0]
		if r.Err == nil || strings.Contains(r.Err.Error(), "unavailable") || !strings.Contains(r.Err.Error(), "WRONGTYPE") {
			t.Fatalf("got %+v, want a WRONGTYPE error", r)
		}
	})

	t.Run("memory per key", func(t *testing.T) {
		// The budget of each algorithm's state in one key (a 25-byte string; a
		// hash took 120 B for the bucket algorithms), with a key name
		// of 14 bytes (sluice:{mem:t}); docs/algorithms.md lists the figures.
		for _, tc := range []struct {
			alg    limit.Algorithm
			budget int64
		}{{limit.TokenBucket, 104}, {limit.GCRA, 104}, {limit.SlidingWindow, 104}, {limit.FixedWindow, 104}} {
			p := &limit.Policy{Algorithm: tc.alg, Limit: 100, Rate: 50, Period: time.Second}
			key := "mem:" + string(tc.alg)[:1] // sluice:{mem:t}, 14 bytes
			if r := takeN(ctx, s, p, key)[0]; r.Err != nil || !r.Allowed {
				t.Fatalf("%s: %+v", tc.alg, r)
			}
			owner, _ := c.PrimaryForKey(ctx, Key(key))
			n, err := owner.Client().MemoryUsage(ctx, Key(key)).Result()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("MEMORY USAGE %s (%s) = %d bytes", Key(key), tc.alg, n)
			if n > tc.budget {
				t.Errorf("%s uses %d bytes, budget %d", tc.alg, n, tc.budget)
			}
		}
	})

	t.Run("all or nothing on one slot", func(t *testing.T) {
		tb := &limit.Policy{Limit: 3, Rate: 1, Period: time.Hour}
		fw := &limit.Policy{Algorithm: limit.FixedWindow, Limit: 2, Period: time.Hour}
		reqs := []limit.Request{{Key: "{aon}:a", Cost: 1, Policy: tb}, {Key: "{aon}:b", Cost: 1, Policy: fw}}
		if s.Group(reqs[0].Key, tb) != s.Group(reqs[1].Key, fw) || s.Group("x", nil) == s.Group("y", nil) {
			t.Fatal("Group must be the hash slot")
		}
		out := make([]limit.Result, 2)
		for round := range 2 {
			if !s.DoAll(ctx, reqs, out) || out[0].Remaining != int64(2-round) || out[1].Remaining != int64(1-round) {
				t.Fatalf("round %d: %+v", round, out)
			}
		}
		if s.DoAll(ctx, reqs, out) || !out[0].Allowed || out[1].Allowed || out[0].Remaining != 1 {
			t.Fatalf("third: %+v, want refused by the window, the bucket untouched at 1", out)
		}
	})
}

// A paused primary: replies within the deadline as unavailable errors, the
// breaker opens, then the node answers again after SIGCONT.
func TestPausedNode(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{NodeTimeout: 20 * time.Second})
	s, err := New(Config{Addrs: c.Addrs(), Timeout: 50 * time.Millisecond, BreakerCooldown: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	p := &limit.Policy{Limit: 1_000_000, Rate: 1, Period: time.Hour}
	if r := takeN(ctx, s, p, "paused")[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	owner, err := c.PrimaryForKey(ctx, Key("paused"))
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = owner.Resume()
		}
	}()
	var slowest time.Duration
	fast := 0
	for i := range 20 {
		dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		start := time.Now()
		r := takeN(dctx, s, p, "paused")[0]
		d := time.Since(start)
		cancel()
		slowest = max(slowest, d)
		// Overloaded, until the breaker's PING goes unanswered: a node
		// that answered within the cool-down counts as alive.
		if !errors.Is(r.Err, limit.ErrUnavailable) {
			t.Fatalf("take %d during pause: %+v", i, r)
		}
		if strings.Contains(r.Err.Error(), ErrCircuitOpen.Error()) {
			fast++
		}
	}
	t.Logf("slowest reply during pause %v; %d of 20 answered by the open breaker", slowest, fast)
	if slowest > 50*time.Millisecond+100*time.Millisecond {
		t.Fatalf("slowest reply %v, deadline 50ms", slowest)
	}
	if fast == 0 {
		t.Fatal("the circuit breaker never opened")
	}
	if st := s.BreakerStates()[owner.Addr]; st != "open" {
		t.Fatalf("breaker of %s is %q, want open", owner.Addr, st)
	}
	if err := owner.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := takeN(ctx, s, p, "paused")[0]
		if r.Err == nil && r.DecidedBy == limit.ByStore {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no strict decision 10s after SIGCONT: %+v", r)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
	if st := s.BreakerStates()[owner.Addr]; st != "closed" {
		t.Fatalf("breaker of %s is %q after recovery, want closed", owner.Addr, st)
	}
}

// breaker is the breaker of the node at addr, made on first use, for tests
// that watch it.
func (s *Store) breaker(addr string) *breaker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.breakerLocked(addr)
}
