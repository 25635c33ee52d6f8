package local

import (
	"hash/maphash"

	"github.com/sluice-rl/sluice/limit"
)

// Receipts in process (docs/receipts.md): the same rules as the Redis
// store's receipt scripts (lua/receipt.go), in Go. A receipt is recorded
// with its take and used with its give-back under the lock of the key's
// shard, so each is one atomic step with the decision it goes with.

// receiptBook holds the receipts of a Store, in the Store's shards: the
// receipts of shard i are read and written only under shards[i].mu. The
// zero value is empty.
type receiptBook struct {
	shards [shards]receiptShard
}

type receiptShard struct {
	m   map[receiptKey]receiptEntry
	ops uint32
}

// receiptKey names one receipt: the user key and the receipt id.
type receiptKey struct{ key, id string }

type receiptEntry struct {
	rec     limit.ReceiptRecord
	expires int64 // µs: from then on the receipt is gone
}

// receipted reports whether r goes the receipt way: a take that records a
// receipt, or any give-back.
func receipted(r *limit.Request) bool {
	return r.Receipt != "" || r.Op == limit.OpAdjust && r.Cost < 0
}

// decideReceipt decides r, a take with a receipt or a give-back, at now:
// the take is decided as any and, when admitted for a cost above 0 under a
// policy whose takes carry receipts (limit.Policy.Receipted), recorded
// under r.Receipt until limit.ReceiptLifeMs; the give-back is refused,
// changing nothing, unless r.Receipt is a receipt in force of a take on
// this key under the same policy (Owner) of at least -r.Cost, which it
// then uses up and returns to the state the take came from (its window).
func (s *Store) decideReceipt(r *limit.Request, now int64) limit.Result {
	i := maphash.String(s.seed, r.Key) % shards
	sh, book := &s.shards[i], &s.receipts.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	give := r.Op == limit.OpAdjust && r.Cost < 0
	p := r.Policy
	if !give {
		res := sh.decide(r, now, s.perShard)
		res.DecidedBy = s.decidedBy
		if res.Err == nil && res.Allowed && r.Op == limit.OpTake && r.Cost > 0 && p.Receipted() {
			life := limit.ReceiptLifeMs(p, res.Window, now)
			book.put(receiptKey{r.Key, r.Receipt}, receiptEntry{limit.ReceiptRecord{Cost: r.Cost, Window: res.Window, Owner: p.Owner()}, now + life*1000}, now, s.perShard)
			res.Receipt = r.Receipt
		}
		return res
	}
	if r.Receipt == "" {
		return limit.Result{Err: limit.ErrReceiptMissing}
	}
	k := receiptKey{r.Key, r.Receipt}
	e, ok := book.m[k]
	switch {
	case !ok || e.expires <= now || !p.Receipted():
		return limit.Result{Err: limit.ErrReceiptInvalid}
	case e.rec.Owner != p.Owner():
		return limit.Result{Err: limit.ErrReceiptPolicy}
	case -r.Cost > e.rec.Cost:
		return limit.Result{Err: limit.ErrReceiptCost}
	}
	delete(book.m, k)
	q := *r
	q.Op, q.Cost, q.Window, q.Receipt = limit.OpReturn, -r.Cost, e.rec.Window, ""
	res := sh.decide(&q, now, s.perShard)
	res.DecidedBy = s.decidedBy
	return res
}

// put records e under k, first making room: expired receipts go, and past
// the bound (that of the Store's buckets per shard) arbitrary ones, down
// to 7/8 of it. A receipt dropped early only refuses its give-back: the
// key admits less, never more.
func (b *receiptShard) put(k receiptKey, e receiptEntry, now int64, maxLen int) {
	if b.m == nil {
		b.m = make(map[receiptKey]receiptEntry)
	}
	b.ops++
	if len(b.m) >= maxLen || b.ops%1024 == 0 {
		for old, oe := range b.m {
			if oe.expires <= now {
				delete(b.m, old)
			}
		}
		for old := range b.m {
			if len(b.m) < maxLen-maxLen/8 {
				break
			}
			delete(b.m, old)
		}
	}
	b.m[k] = e
}

// Receipts returns the number of receipts held, expired ones not yet
// swept included.
func (s *Store) Receipts() int {
	n := 0
	for i := range s.shards {
		s.shards[i].mu.Lock()
		n += len(s.receipts.shards[i].m)
		s.shards[i].mu.Unlock()
	}
	return n
}
