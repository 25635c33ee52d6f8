package local

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/algotest"
	"github.com/sluice-rl/sluice/limit"
)

// The receipt vectors on the Store, on a clock the test sets: the same
// table as the Lua receipt scripts' (lua/receipt_test.go).
func TestReceiptVectors(t *testing.T) {
	t.Parallel()
	var now int64
	s := New(Config{Now: func() time.Time { return time.UnixMicro(now) }})
	algotest.RunReceipts(t, algotest.Receipts, "r:", func(t *testing.T, key string, p *limit.Policy, cost int64, give bool, receipt string, at int64) limit.Result {
		now = at
		r := limit.Request{Key: key, Cost: cost, Op: limit.OpTake, Policy: p, Receipt: receipt}
		if give {
			r.Op = limit.OpAdjust
		}
		out := make([]limit.Result, 1)
		s.Do(context.Background(), []limit.Request{r}, out)
		return out[0]
	}, s.receiptTTL)
}

// receiptTTL is the time in ms until the Store forgets key's receipt id.
func (s *Store) receiptTTL(_ *testing.T, key, id string, now int64) int64 {
	i := maphash.String(s.seed, key) % shards
	s.shards[i].mu.Lock()
	defer s.shards[i].mu.Unlock()
	e, ok := s.receipts.shards[i].m[receiptKey{key, id}]
	if !ok || e.expires <= now {
		return algotest.NoKey
	}
	return (e.expires - now + 999) / 1000
}

// A give-back without a receipt never reaches a state; the receipts held
// stay bounded by MaxKeys, and dropping one only refuses its give-back.
func TestReceiptsBounded(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	s := New(Config{MaxKeys: 64 * 10, Now: func() time.Time { return now }})
	p := &limit.Policy{Name: "p", Limit: 1000, Rate: 1, Period: time.Hour}
	out := make([]limit.Result, 1)
	s.Do(context.Background(), []limit.Request{{Key: "k", Cost: -5, Op: limit.OpAdjust, Policy: p}}, out)
	if out[0].Err != limit.ErrReceiptMissing {
		t.Fatalf("a give-back without a receipt: %+v", out[0])
	}
	for i := range 10_000 {
		s.Do(context.Background(), []limit.Request{{Key: "k" + itoa(i%50), Cost: 1, Policy: p, Receipt: limit.NewReceipt()}}, out)
		if out[0].Receipt == "" {
			t.Fatalf("take %d recorded no receipt: %+v", i, out[0])
		}
	}
	if got, most := s.Receipts(), 64*10; got > most {
		t.Fatalf("%d receipts held after 10,000 receipted takes, bound %d", got, most)
	}
}

// Goroutines give back by the same receipts at once: each gives back once.
func TestReceiptGoodOnceConcurrently(t *testing.T) {
	t.Parallel()
	s := New(Config{})
	p := &limit.Policy{Name: "p", Limit: 1000, Rate: 1, Period: time.Hour}
	const n = 200
	ids := make([]string, n)
	out := make([]limit.Result, 1)
	for i := range ids {
		ids[i] = limit.NewReceipt()
		s.Do(context.Background(), []limit.Request{{Key: "k", Cost: 3, Policy: p, Receipt: ids[i]}}, out)
	}
	var wg sync.WaitGroup
	var applied atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			one := make([]limit.Result, 1)
			for _, id := range ids {
				s.Do(context.Background(), []limit.Request{{Key: "k", Cost: -3, Op: limit.OpAdjust, Policy: p, Receipt: id}}, one)
				if one[0].Err == nil {
					applied.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	s.Do(context.Background(), []limit.Request{{Key: "k", Cost: 1, Op: limit.OpPeek, Policy: p}}, out)
	if applied.Load() != n || out[0].Remaining != 1000 {
		t.Fatalf("%d receipts raced by 4 goroutines: %d applied, %d left; want %d and 1000", n, applied.Load(), out[0].Remaining, n)
	}
}
