package local

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// A full store never drops state whose loss would admit more: two slots
// held for an hour and a drained bucket survive 5,000 takes of other keys
// on a store of 256 keys (4 per shard), so a third acquire and another
// take of the drained key are still refused.
func TestFullStoreKeepsLiveState(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	s := New(Config{MaxKeys: 64 * 4, Now: func() time.Time { return now }})
	ctx := context.Background()
	jobs := &limit.Policy{Name: "jobs", Algorithm: limit.Concurrency, Limit: 2, Period: time.Hour}
	api := &limit.Policy{Name: "api", Limit: 10, Rate: 10, Period: time.Hour}
	for _, tok := range []string{"a", "b"} {
		if r := s.Acquire(ctx, "jobs", jobs, tok, 3_600_000); !r.Allowed {
			t.Fatalf("acquire %s: %+v", tok, r)
		}
	}
	out := make([]limit.Result, 1)
	s.Do(ctx, []limit.Request{{Key: "drained", Cost: 10, Policy: api}}, out)
	if !out[0].Allowed {
		t.Fatalf("drain: %+v", out[0])
	}
	for i := range 5000 {
		now = now.Add(time.Millisecond)
		s.Do(ctx, []limit.Request{{Key: fmt.Sprint("other", i), Cost: 1, Policy: api}}, out)
	}
	r := s.Acquire(ctx, "jobs", jobs, "c", 3_600_000)
	s.Do(ctx, []limit.Request{{Key: "drained", Cost: 1, Policy: api}}, out)
	if r.Allowed || out[0].Allowed {
		t.Fatalf("after 5,000 other keys: third acquire %+v, take of the drained key %+v; want both refused", r, out[0])
	}
	if n := s.Len(); n > 64*4 {
		t.Fatalf("store holds %d states, bound %d", n, 64*4)
	}
	if got := s.Full(); got == 0 {
		t.Fatal("no new key was refused as full")
	}
	t.Logf("%d of 5,000 new keys refused with ErrFull; %d states held", s.Full(), s.Len())
}

// Past the bound, a new key is an error (ErrFull, counted), never an
// admission bought with another key's state; a key already held is still
// decided; once states read as none again (buckets refilled), new keys
// are admitted.
func TestFullStoreRefusesNewKeys(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	s := New(Config{MaxKeys: 64, Now: func() time.Time { return now }}) // one per shard
	ctx := context.Background()
	api := &limit.Policy{Name: "api", Limit: 10, Rate: 10, Period: time.Minute} // 6 s a token
	out := make([]limit.Result, 1)
	take := func(key string) limit.Result {
		s.Do(ctx, []limit.Request{{Key: key, Cost: 1, Policy: api}}, out)
		return out[0]
	}
	held := map[string]bool{}
	refused := 0
	for i := range 1000 {
		key := fmt.Sprint("k", i)
		switch r := take(key); {
		case r.Err == nil && r.Allowed:
			held[key] = true
		case errors.Is(r.Err, ErrFull):
			refused++
		default:
			t.Fatalf("key %d: %+v", i, r)
		}
	}
	if len(held) > 64 || refused == 0 || uint64(refused) != s.Full() {
		t.Fatalf("%d keys held, %d refused, Full %d; want at most 64 held, the rest refused and counted", len(held), refused, s.Full())
	}
	for key := range held {
		if r := take(key); r.Err != nil || !r.Allowed || r.Remaining != 8 {
			t.Fatalf("held key %s: %+v, want its second token", key, r)
		}
	}
	now = now.Add(time.Minute) // every bucket is full again: the same as none
	for i := range 1000 {
		if r := take(fmt.Sprint("new", i)); errors.Is(r.Err, ErrFull) {
			continue
		} else if r.Err != nil || !r.Allowed {
			t.Fatalf("new key %d after the refill: %+v", i, r)
		}
	}
	if got := s.Len(); got == 0 || got > 64 {
		t.Fatalf("%d states after the refill, want 1 to 64", got)
	}
}

// A region's pool is dropped to make room: an absent pool is empty, so
// its loss refuses more, never admits more.
func TestFullStoreDropsPools(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	s := New(Config{MaxKeys: 64, Now: func() time.Time { return now }})
	ctx := context.Background()
	pool := &limit.Policy{Algorithm: limit.Pool, Limit: 10, Rate: 5, Period: time.Second}
	api := &limit.Policy{Name: "api", Limit: 10, Rate: 10, Period: time.Hour}
	out := make([]limit.Result, 1)
	for i := range 64 * 20 {
		s.Do(ctx, []limit.Request{{Key: fmt.Sprint("p", i), Cost: 5, Policy: pool, Op: limit.OpReturn}}, out)
	}
	for i := range 64 {
		s.Do(ctx, []limit.Request{{Key: fmt.Sprint("k", i), Cost: 1, Policy: api}}, out)
		if errors.Is(out[0].Err, ErrFull) {
			t.Fatalf("key %d refused while pools could make room", i)
		}
		if ok, _ := s.Reset(ctx, fmt.Sprint("k", i), api); !ok { // its shard holds pools only again
			t.Fatalf("key %d not held", i)
		}
	}
}

// A state whose expiry comes nearer (tokens given back) is swept once it
// passes, though the shard was found full before: the sweep's bound of
// the earliest expiry follows every write.
func TestFullStoreSweepsAfterGiveBack(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	s := New(Config{MaxKeys: 64, Now: func() time.Time { return now }}) // one per shard
	ctx := context.Background()
	api := &limit.Policy{Name: "api", Limit: 10, Rate: 10, Period: time.Hour} // 6 min a token
	out := make([]limit.Result, 1)
	do := func(key string, cost int64, op limit.Op) limit.Result {
		s.Do(ctx, []limit.Request{{Key: key, Cost: cost, Policy: api, Op: op}}, out)
		return out[0]
	}
	shardOf := func(key string) uint64 { return maphash.String(s.seed, key) % shards }
	var other string
	for i := 0; other == ""; i++ {
		if k := fmt.Sprint("o", i); shardOf(k) == shardOf("drained") {
			other = k
		}
	}
	if r := do("drained", 10, limit.OpTake); !r.Allowed {
		t.Fatalf("drain: %+v", r)
	}
	if r := do(other, 1, limit.OpTake); !errors.Is(r.Err, ErrFull) {
		t.Fatalf("a second key on a full shard: %+v, want ErrFull", r)
	}
	if r := do("drained", 9, limit.OpReturn); r.Remaining != 9 || r.ResetAfterMs != 360_000 {
		t.Fatalf("give back 9: %+v", r)
	}
	now = now.Add(6*time.Minute + time.Millisecond) // the bucket is full again
	if r := do(other, 1, limit.OpTake); r.Err != nil || !r.Allowed {
		t.Fatalf("a second key once the first reads as none: %+v", r)
	}
}

// An RL.MTAKE whose new key finds no room takes nothing and answers the
// error for every rule.
func TestFullStoreMTake(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	s := New(Config{MaxKeys: 64, Now: func() time.Time { return now }})
	ctx := context.Background()
	api := &limit.Policy{Name: "api", Limit: 10, Rate: 10, Period: time.Hour}
	shardOf := func(key string) uint64 { return maphash.String(s.seed, key) % shards }
	var other string
	for i := 0; other == ""; i++ {
		if k := fmt.Sprint("o", i); shardOf(k) == shardOf("a") {
			other = k
		}
	}
	out := make([]limit.Result, 2)
	s.Do(ctx, []limit.Request{{Key: "a", Cost: 1, Policy: api}}, out[:1])
	reqs := []limit.Request{{Key: "a", Cost: 1, Policy: api}, {Key: other, Cost: 1, Policy: api}}
	if s.DoAll(ctx, reqs, out) || !errors.Is(out[0].Err, ErrFull) || !errors.Is(out[1].Err, ErrFull) {
		t.Fatalf("mtake onto a full shard: %+v", out)
	}
	s.Do(ctx, reqs[:1], out[:1])
	if out[0].Remaining != 8 {
		t.Fatalf("after the refused mtake: %+v, want 8 left (one take before it, one now)", out[0])
	}
}
