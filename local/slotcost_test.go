package local

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// An acquire looks at O(log held) slots, not every held one: the slots
// visited by one acquire (and one refused) on a set of n held slots stay
// within a few times log2(n), at 1,024 and at 8,192 held.
func TestAcquireVisitsLogHeld(t *testing.T) {
	t.Parallel()
	for _, n := range []int64{1024, 8192} {
		var st SlotState
		now := int64(1_000_000_000)
		for i := range n {
			// Expiries spread over an hour, in no order.
			ttl := 3_600_000 - (i*7919)%3_600_000
			if r := AcquireSlot(&st, n+1, fmt.Sprint("t", i), ttl, now); !r.Allowed {
				t.Fatalf("n %d: fill %d refused: %+v", n, i, r)
			}
		}
		bound := 8 * int64(bits.Len64(uint64(n))) // 8 log2(n): sift up and down, both heaps
		st.visits = 0
		if r := AcquireSlot(&st, n+1, "last", 1000, now+1); !r.Allowed || r.Remaining != 0 {
			t.Fatalf("n %d: acquire %+v", n, r)
		}
		t.Logf("n %d: an allowed acquire visited %d slots (bound %d)", n, st.visits, bound)
		if got := st.visits; got > bound {
			t.Errorf("n %d: an allowed acquire visited %d slots, want at most %d", n, got, bound)
		}
		st.visits = 0
		if r := AcquireSlot(&st, n+1, "refused", 1000, now+2); r.Allowed || r.RetryAfterMs < 1 {
			t.Fatalf("n %d: acquire past the limit %+v", n, r)
		}
		if got := st.visits; got > bound {
			t.Errorf("n %d: a refused acquire visited %d slots, want at most %d", n, got, bound)
		}
		st.visits = 0
		if !ReleaseSlot(&st, "t7", now+3) {
			t.Fatalf("n %d: release of a held slot", n)
		}
		if got := st.visits; got > bound {
			t.Errorf("n %d: a release visited %d slots, want at most %d", n, got, bound)
		}
	}
}

// The heaps decide as a plain map of token → expiry scanned whole (the
// model): a random sequence of acquires, renewals and releases, with
// expiries in no order, gets the same replies from both.
func TestSlotStateModel(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	var st SlotState
	model := map[string]int64{}
	now := int64(1_000_000)
	for i := range 20_000 {
		now += rng.Int64N(3_000)
		tok := fmt.Sprint("t", rng.IntN(64))
		if rng.IntN(3) == 0 {
			exp, ok := model[tok]
			delete(model, tok)
			if got, want := ReleaseSlot(&st, tok, now), ok && exp > now; got != want {
				t.Fatalf("step %d: release %s: %v, want %v", i, tok, got, want)
			}
			continue
		}
		limitN, ttl := int64(1+rng.IntN(40)), int64(1+rng.IntN(100))
		got := AcquireSlot(&st, limitN, tok, ttl, now)
		for k, exp := range model {
			if exp <= now {
				delete(model, k)
			}
		}
		want := limit.Result{Limit: limitN, RetryAfterMs: -1}
		if int64(len(model)) < limitN {
			model[tok] = now + ttl*1000
			want.Allowed = true
		}
		first, last := int64(0), int64(0)
		for _, exp := range model {
			if first == 0 || exp < first {
				first = exp
			}
			last = max(last, exp)
		}
		if len(model) > 0 {
			want.ResetAfterMs = ceilDiv(last-now, 1000)
			if !want.Allowed {
				want.RetryAfterMs = max(1, ceilDiv(first-now, 1000))
			}
		}
		want.Remaining = max(0, limitN-int64(len(model)))
		if got != want {
			t.Fatalf("step %d: acquire %s limit %d ttl %d: %+v, want %+v", i, tok, limitN, ttl, got, want)
		}
		if got, want := st.Held(now), int64(len(model)); got != want {
			t.Fatalf("step %d: Held %d, want %d", i, got, want)
		}
	}
}

// BenchmarkSlotsHeld is one acquire and one release on a key of the Store
// (under its shard lock) that holds `held` slots of an hour.
func BenchmarkSlotsHeld(b *testing.B) {
	for _, n := range []int{1_000, 20_000, 100_000} {
		b.Run(fmt.Sprintf("held=%d", n), func(b *testing.B) {
			now := time.UnixMicro(1_000_000_000)
			s := New(Config{Now: func() time.Time { return now }})
			p := &limit.Policy{Algorithm: limit.Concurrency, Limit: int64(n) + 1, Period: time.Hour}
			fillSlots(b, s, "k", p, n)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if r := s.Acquire(ctx, "k", p, "bench", 1000); !r.Allowed || r.Remaining != 0 {
					b.Fatalf("acquire %+v", r)
				}
				if held, _ := s.Release(ctx, "k", p, "bench"); !held {
					b.Fatal("release: not held")
				}
			}
		})
	}
}

// fillSlots makes key hold n slots of an hour under p, as n acquires
// would, without their cost, and checks that it does.
func fillSlots(b *testing.B, s *Store, key string, p *limit.Policy, n int) {
	b.Helper()
	ctx := context.Background()
	if r := s.Acquire(ctx, key, p, "first", 3_600_000); !r.Allowed {
		b.Fatalf("first acquire %+v", r)
	}
	st := s.slotsOf(key, p)
	now := s.now().UnixMicro()
	for i := 1; i < n; i++ {
		st.put(fmt.Sprint("t", i), now+3_600_000_000-int64(i))
	}
	if got := st.Held(now); got != int64(n) {
		b.Fatalf("filled %d slots, want %d", got, n)
	}
}

// slotsOf is key's slot set under p, for tests.
func (s *Store) slotsOf(key string, p *limit.Policy) *SlotState {
	sh := &s.shards[maphash.String(s.seed, key)%shards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.buckets[stateKey{p.Space, key}].st.Slots
}
