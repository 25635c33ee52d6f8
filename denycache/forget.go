package denycache

import (
	"hash/maphash"
	"sync/atomic"
)

// The ring of Forget and Clear calls: a refusal whose request was sent
// before a Forget of its key, or before a Clear, is not kept (it may
// predate the RL.RESET, the give-back or the policy change).

// forgetRing is how many Forget and Clear calls a Cache remembers, by key:
// a refusal in flight across more of them is not kept, whatever its key
// (over 1,000 give-backs or resets on one instance during one store round
// trip).
const forgetRing = 1024

// allKeys is the key hash a Clear leaves in the ring: every key.
const allKeys = 0

// forgotten is one slot of the ring of Forget calls: the key hash of call
// gen. The writer stores hash, then gen; a reader that finds gen finds
// that call's hash or a later call's, and a later one is seen by its
// re-reading of Cache.gen (see stale).
type forgotten struct {
	gen, hash atomic.Uint64
}

// Gen returns the count of Forget and Clear calls so far; read it, with
// the time, before the store call whose refusal Refused records.
func (d *Cache) Gen() uint64 { return d.gen.Load() }

// hash is key's hash, never allKeys.
func (d *Cache) hash(key string) uint64 {
	if h := maphash.String(d.seed, key); h != allKeys {
		return h
	}
	return 1
}

// forgot records call g of Forget (key hash h) or Clear (allKeys).
func (d *Cache) forgot(h uint64) {
	g := d.gen.Add(1)
	f := &d.forgets[g%forgetRing]
	f.hash.Store(h)
	f.gen.Store(g)
}

// stale reports whether a refusal of the key of hash h, whose request was
// sent when Gen was gen, may predate a Forget of its key or a Clear: one
// of the calls since gen names it or every key, or is not known for sure
// (not yet written, or overwritten by a call forgetRing later). Calls of
// other keys do not make it stale.
func (d *Cache) stale(h, gen uint64) bool {
	now := d.gen.Load()
	if now == gen {
		return false
	}
	if now-gen >= forgetRing {
		return true
	}
	for g := gen + 1; g <= now; g++ {
		f := &d.forgets[g%forgetRing]
		if f.gen.Load() != g {
			return true
		}
		if fh := f.hash.Load(); fh == h || fh == allKeys {
			return true
		}
	}
	// A call forgetRing later may have written a hash read above: it
	// counted itself in gen first.
	return d.gen.Load()-gen >= forgetRing
}
