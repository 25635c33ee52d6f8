package cluster

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// TestDurableWithoutReplica: on a node with no replica, every spend of a
// durability: replica policy that the node admitted is answered
// unavailable (ErrNotReplicated, for on_store_error) and counted; the
// plain take, the peek and the refusal in the same Do are answered by the
// node. The spends stay on the node (never replayed, never given back):
// the next peek sees them.
func TestDurableWithoutReplica(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	s, err := New(Config{URL: "redis://" + n.Addr, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	durable := &limit.Policy{Name: "d", Limit: 5, Rate: 1, Period: time.Hour, Durability: limit.DurabilityReplica}
	plain := &limit.Policy{Name: "p", Limit: 5, Rate: 1, Period: time.Hour}
	do := func(reqs ...limit.Request) []limit.Result {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		out := make([]limit.Result, len(reqs))
		s.Do(ctx, reqs, out)
		return out
	}
	out := do(
		limit.Request{Key: "a", Cost: 1, Policy: durable},
		limit.Request{Key: "b", Cost: 1, Policy: plain},
		limit.Request{Key: "a", Cost: 1, Op: limit.OpPeek, Policy: durable},
		limit.Request{Key: "c", Cost: 6, Policy: durable}, // over the limit: refused
	)
	if err := out[0].Err; !errors.Is(err, limit.ErrUnavailable) || !errors.Is(err, ErrNotReplicated) {
		t.Errorf("durable take: %+v, want unavailable: %v", out[0], ErrNotReplicated)
	}
	for i, want := range []bool{1: true, 2: true, 3: false} {
		if i == 0 {
			continue
		}
		if r := out[i]; r.Err != nil || r.Allowed != want || r.DecidedBy != limit.ByStore {
			t.Errorf("request %d: %+v, want allowed %v by the store", i, r, want)
		}
	}
	// In a spell (no WAIT sent) or by a probe that fails: either way
	// not acknowledged.
	out = do(limit.Request{Key: "a", Cost: 1, Policy: durable})
	if err := out[0].Err; !errors.Is(err, ErrNotReplicated) {
		t.Errorf("second durable take: %+v, want %v", out[0], ErrNotReplicated)
	}
	out = do(limit.Request{Key: "a", Cost: 1, Op: limit.OpPeek, Policy: durable})
	if got, want := out[0].Remaining, int64(3); out[0].Err != nil || got != want {
		t.Errorf("peek after two unacknowledged takes: remaining %d (%v), want %d: a spend not acknowledged stays spent", got, out[0].Err, want)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	conc := &limit.Policy{Name: "c", Algorithm: limit.Concurrency, Limit: 2, Period: time.Minute, Durability: limit.DurabilityReplica}
	if r := s.Acquire(ctx, "slots", conc, "tok1", 60_000); !errors.Is(r.Err, ErrNotReplicated) {
		t.Errorf("durable acquire: %+v, want %v", r, ErrNotReplicated)
	}
	multi := make([]limit.Result, 2)
	if s.DoAll(ctx, []limit.Request{{Key: "{m}x", Cost: 1, Policy: durable}, {Key: "{m}y", Cost: 1, Policy: plain}}, multi) || !errors.Is(multi[0].Err, ErrNotReplicated) {
		t.Errorf("durable RL.MTAKE: %+v, want %v", multi, ErrNotReplicated)
	}
	out = do(limit.Request{Key: "a", Cost: 1, Op: limit.OpAdjust, Policy: durable})
	if !errors.Is(out[0].Err, ErrNotReplicated) {
		t.Errorf("durable RL.ADJUST +1: %+v, want %v", out[0], ErrNotReplicated)
	}
	// d: the two takes, RL.MTAKE, RL.ADJUST; c: the acquire.
	// Its own deadline: the three calls above spend most of ctx's 300ms
	// waiting for a replica that never acknowledges (CI under load:
	// "PrimariesWithoutReplica = [], context deadline exceeded").
	infoCtx, infoCancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer infoCancel()
	if bare, err := s.PrimariesWithoutReplica(infoCtx); err != nil || len(bare) != 1 || bare[0] != n.Addr {
		t.Errorf("PrimariesWithoutReplica = %v, %v; want [%s]", bare, err, n.Addr)
	}
	if got, want := s.Unacked(), (map[string]int64{"d": 4, "c": 1}); len(got) != len(want) || got["d"] != want["d"] || got["c"] != want["c"] {
		t.Errorf("Unacked = %v, want %v", got, want)
	}
}

// TestDurableWithReplicas: with a replica behind every primary, durable
// takes on every node are answered by the store, and none is unacked.
func TestDurableWithReplicas(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	s := newStore(t, c.Addrs())
	durable := &limit.Policy{Name: "d", Limit: 3, Rate: 1, Period: time.Hour, Durability: limit.DurabilityReplica}
	keys := make([]string, 60)
	for i := range keys {
		keys[i] = "durable:" + strconv.Itoa(i)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	for i, r := range takeN(ctx, s, durable, keys...) {
		if r.Err != nil || !r.Allowed || r.DecidedBy != limit.ByStore {
			t.Errorf("%s: %+v, want allowed by the store", keys[i], r)
		}
	}
	if got := s.Unacked(); len(got) != 0 {
		t.Errorf("Unacked = %v, want none", got)
	}
	if bare, err := s.PrimariesWithoutReplica(ctx); err != nil || len(bare) != 0 {
		t.Errorf("PrimariesWithoutReplica = %v, %v; want none", bare, err)
	}
}

// TestDurableOnSentinel: a primary under Sentinel goes through the same
// pipelines: with its replica, durable takes are answered by the store.
func TestDurableOnSentinel(t *testing.T) {
	t.Parallel()
	g := redistest.NewSentinel(t, localredis.SentinelConfig{Replicas: 1})
	s, err := New(Config{MasterName: g.MasterName(), SentinelAddrs: g.SentinelAddrs(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	// The replica may still be syncing when the group is up.
	for {
		bare, err := s.PrimariesWithoutReplica(ctx)
		if err == nil && len(bare) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("PrimariesWithoutReplica = %v, %v: the replica never connected", bare, err)
		}
		time.Sleep(10 * time.Millisecond) // polling INFO replication
	}
	durable := &limit.Policy{Name: "d", Limit: 3, Rate: 1, Period: time.Hour, Durability: limit.DurabilityReplica}
	for i, r := range takeN(ctx, s, durable, "a", "b", "c") {
		if r.Err != nil || !r.Allowed || r.DecidedBy != limit.ByStore {
			t.Errorf("take %d: %+v, want allowed by the store", i, r)
		}
	}
	if got := s.Unacked(); len(got) != 0 {
		t.Errorf("Unacked = %v, want none", got)
	}
}

func TestWaitMs(t *testing.T) {
	for _, tc := range []struct {
		left time.Duration
		want int64
	}{{50 * time.Millisecond, 40}, {time.Millisecond, 1}, {0, 1}, {-time.Second, 1}, {time.Second, 800}} {
		if got := waitMs(tc.left); got != tc.want {
			t.Errorf("waitMs(%v) = %d, want %d", tc.left, got, tc.want)
		}
	}
}

// TestSpells: each spell after a WAIT not acknowledged is twice the last,
// from minSpell to the breaker cool-down; a spell set in case a probe
// fails keeps the length in force.
func TestSpells(t *testing.T) {
	q := &nodeQueue{s: &Store{cfg: Config{BreakerCooldown: 100 * time.Millisecond}}}
	var got []time.Duration
	for range 6 {
		got = append(got, q.nextSpell(true))
	}
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Errorf("spells %v, want %v", got, want)
	}
	if got, want := q.nextSpell(false), 100*time.Millisecond; got != want {
		t.Errorf("provisional spell %v, want %v", got, want)
	}
	q.spell.Store(0)
	if got, want := q.nextSpell(false), minSpell; got != want {
		t.Errorf("provisional spell after an acknowledgement %v, want %v", got, want)
	}
}
