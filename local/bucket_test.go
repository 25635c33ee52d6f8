package local

import (
	"context"
	"errors"
	"hash/maphash"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/algotest"
	"github.com/sluice-rl/sluice/limit"
)

// The one table of vectors, on the Go code of every algorithm.
func TestVectors(t *testing.T) {
	t.Parallel()
	for _, tab := range append(algotest.Tables(), algotest.Table{Algorithm: "calendar-skew", Vectors: algotest.CalendarSkew}) {
		t.Run(string(tab.Algorithm), func(t *testing.T) {
			if len(tab.Vectors) == 0 {
				t.Fatalf("no vectors for %s", tab.Algorithm)
			}
			states := map[string]*State{}
			algotest.RunAt(t, tab.Vectors, "", func(t *testing.T, key string, p *limit.Policy, cost int64, op limit.Op, now, sluiceNow int64) limit.Result {
				st := states[key]
				if st == nil {
					st = &State{}
					states[key] = st
				}
				res, _, err := Decide(st, Input{Policy: p, Op: op, Cost: cost, Now: now, SluiceNow: sluiceNow})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}, nil)
		})
	}
}

// The Store must give the same answers as the bare algorithms. A
// negative adjust goes to the Store only with a receipt (receipt.go, and
// its own vectors in receipt_test.go); here the algorithm's give-back to
// the state in force, which is an OpReturn to the current window, runs
// as one.
func TestStoreVectors(t *testing.T) {
	t.Parallel()
	for _, tab := range algotest.Tables() {
		t.Run(string(tab.Algorithm), func(t *testing.T) {
			var now int64
			s := New(Config{Now: func() time.Time { return time.UnixMicro(now) }})
			algotest.RunTTL(t, tab.Vectors, "k:", func(t *testing.T, key string, p *limit.Policy, cost int64, op limit.Op, at int64) limit.Result {
				now = at
				if op == limit.OpAdjust && cost < 0 {
					op, cost = limit.OpReturn, -cost
				}
				out := make([]limit.Result, 1)
				s.Do(context.Background(), []limit.Request{{Key: key, Cost: cost, Op: op, Policy: p}}, out)
				if out[0].DecidedBy != limit.ByEmbedded {
					t.Fatalf("decided_by = %q, want %q", out[0].DecidedBy, limit.ByEmbedded)
				}
				return out[0]
			}, s.pttl)
		})
	}
}

func TestStoreBoundedKeys(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	s := New(Config{MaxKeys: 64 * 100, Now: func() time.Time { return now }})
	p := &limit.Policy{Limit: 10, Rate: 1, Period: time.Hour}
	out := make([]limit.Result, 1)
	for i := range 100_000 {
		s.Do(context.Background(), []limit.Request{{Key: "k" + itoa(i), Cost: 1, Policy: p}}, out)
		if !out[0].Allowed && !errors.Is(out[0].Err, ErrFull) {
			t.Fatalf("key %d: %+v, want admitted or ErrFull", i, out[0])
		}
	}
	if n := s.Len(); n > 64*100 {
		t.Fatalf("store holds %d buckets, bound is %d", n, 64*100)
	}
}

func TestStoreDropsFullBuckets(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	s := New(Config{MaxKeys: 64 * 10, Now: func() time.Time { return now }})
	p := &limit.Policy{Limit: 10, Rate: 10, Period: time.Second}
	out := make([]limit.Result, 1)
	// A drained key must survive the sweeps that idle full keys do not.
	s.Do(context.Background(), []limit.Request{{Key: "drained", Cost: 10, Policy: p}}, out)
	for i := range 5000 {
		now = now.Add(time.Second) // every earlier bucket is full again
		s.Do(context.Background(), []limit.Request{{Key: "k" + itoa(i), Cost: 1, Policy: p}}, out)
		s.Do(context.Background(), []limit.Request{{Key: "drained", Cost: 10, Policy: p}}, out)
		if !out[0].Allowed {
			t.Fatalf("round %d: drained key rejected after a full refill", i)
		}
	}
	if n := s.Len(); n > 64*10 {
		t.Fatalf("store holds %d buckets, bound is %d", n, 64*10)
	}
}

func TestResetReportsState(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	s := New(Config{Now: func() time.Time { return now }})
	p := &limit.Policy{Limit: 2, Rate: 1, Period: time.Second}
	ctx := context.Background()
	if ok, _ := s.Reset(ctx, "k", p); ok {
		t.Fatal("reset of unknown key reported state")
	}
	out := make([]limit.Result, 1)
	s.Do(ctx, []limit.Request{{Key: "k", Cost: 2, Policy: p}}, out)
	if ok, _ := s.Reset(ctx, "k", p); !ok {
		t.Fatal("reset of drained key reported no state")
	}
	s.Do(ctx, []limit.Request{{Key: "k", Cost: 2, Policy: p}}, out)
	if !out[0].Allowed {
		t.Fatal("take after reset rejected")
	}
}

// pttl is key's TTL at now in ms, as PTTL replies it (-2: no key), for
// algotest.RunTTL: the time until the store forgets the key's state.
func (s *Store) pttl(_ *testing.T, key string, now int64) int64 {
	sh := &s.shards[maphash.String(s.seed, key)%shards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.buckets[stateKey{key: key}]
	if e == nil || e.expires <= now {
		return -2
	}
	return (e.expires - now) / 1000
}

func itoa(i int) string { return strconv.Itoa(i) }

func BenchmarkTakeBucket(b *testing.B) {
	p := &limit.Policy{Limit: 1 << 30, Rate: 1_000_000, Period: time.Second}
	bk, _ := p.Bucket()
	var st BucketState
	now := algotest.T0
	b.ReportAllocs()
	for b.Loop() {
		now++
		if res, _ := TakeBucket(&st, bk, 1, now, limit.OpTake); !res.Allowed {
			b.Fatal("rejected")
		}
	}
}

func BenchmarkStore(b *testing.B) {
	for _, keys := range []int{1, 1_000_000} {
		b.Run("keys="+itoa(keys), func(b *testing.B) {
			s := New(Config{})
			p := &limit.Policy{Limit: 1 << 30, Rate: 1_000_000_000, Period: time.Second}
			names := make([]string, min(keys, 1<<16))
			for i := range names {
				names[i] = "key:" + itoa(i)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				out := make([]limit.Result, 1)
				req := []limit.Request{{Cost: 1, Policy: p}}
				i := 0
				for pb.Next() {
					req[0].Key = names[i%len(names)]
					i++
					s.Do(context.Background(), req, out)
				}
			})
		})
	}
}

// BenchmarkDecide is one admitted take of each algorithm through Decide,
// parameters derived from the policy on every call as the store does.
func BenchmarkDecide(b *testing.B) {
	for _, alg := range limit.Algorithms {
		b.Run(string(alg), func(b *testing.B) {
			p := &limit.Policy{Algorithm: alg, Limit: 1 << 30, Rate: 1_000_000, Period: time.Second}
			var st State
			now := algotest.T0
			b.ReportAllocs()
			for b.Loop() {
				now++
				if res, _, err := Decide(&st, Input{Policy: p, Op: limit.OpTake, Cost: 1, Now: now}); err != nil || !res.Allowed {
					b.Fatal("rejected", err)
				}
			}
		})
	}
}
