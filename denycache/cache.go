package denycache

import (
	"errors"
	"hash/maphash"
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/sluice-rl/sluice/limit"
)

// DefaultSize is the number of refusals a Cache keeps by default, and
// DefaultTTL the longest it answers one of them.
const (
	DefaultSize = 65_536
	DefaultTTL  = time.Second
)

// shards spreads the cache over locks.
const shards = 16

// Config configures a Cache. The zero value of every field means its
// default.
type Config struct {
	// Size bounds the refusals kept, whatever the number of keys; 0 means
	// DefaultSize. Past it the oldest refusal is forgotten (its key
	// goes to the store again).
	Size int
	// MaxTTL caps how long one refusal is answered locally; 0 means
	// DefaultTTL. It bounds what a give-back or an RL.RESET on another
	// instance can make this one refuse that the store would admit.
	MaxTTL time.Duration
}

// Cache is the deny cache of one sluice instance: a refusal of the store
// for cost c with retry_after R (ms) is answered here, for the requests
// of the same key and policy of cost c (token_bucket, gcra, fixed_window:
// of cost ≥ c, their retry_after computed exactly), for min(R − 1 ms,
// MaxTTL) from the moment the request was sent. Absent a give-back, the store refuses
// all of those until then, for every algorithm of the config:
//
//   - token_bucket and gcra: nothing but time and give-backs adds tokens,
//     and R is the time until c tokens exist, rounded up: c tokens do not
//     exist before R − 1 ms after the script ran, which is after the
//     request was sent; a larger cost needs longer.
//   - fixed_window: R is the rest of the window, and the window's count
//     only grows within it.
//   - sliding_window: the estimate p × (P − e) + c × P never grows but by
//     a take, and R is the first tick at which c fits, exactly (not an
//     estimate of it); a larger cost fits no earlier, but when is not a
//     function of the cost alone, so only cost c is answered.
//
// A refusal with retry -1 (cost > limit) is answered for MaxTTL, with
// retry -1. The reply is the store's six fields as they count down:
// allowed 0, the limit, the remaining the refusal reported, retry_after
// and reset_after counted down from it (retry_after at least 1 while a
// refusal is answered; both at most 1 ms earlier than the store's),
// decided_by deny-cache. Keys are (key, policy pointer): a policy changed
// by RL.POLICY or a reload is a new pointer, so a refusal under the old
// one is never answered again; and Clear empties the cache when the
// policies in force change (a policy that comes back keeps its pointer,
// while the key's state went on under another).
//
// It is safe for concurrent use; Lookup takes no lock while nothing
// refused is live, and the memory is bounded by Size, whatever the number
// of keys. Time is a parameter of every method.
type Cache struct {
	shards [shards]*lru.Cache[denyKey, denial]
	seed   maphash.Seed
	maxTTL time.Duration
	// latest is the latest expiry of a refusal added, ns since the
	// epoch: past it nothing is live and Lookup returns at once.
	latest atomic.Int64
	// gen counts the Forget and Clear calls; forgets[g%forgetRing] names
	// the key of call g (its hash, or allKeys). A refusal whose request
	// was sent before a Forget of its key, or a Clear, is not kept: it may
	// predate the RL.RESET or the give-back. A Forget of another key
	// changes nothing for it.
	gen     atomic.Uint64
	forgets [forgetRing]forgotten

	hits, added atomic.Int64
}

// denyKey names one refusal: the key under one policy.
type denyKey struct {
	key string
	p   *limit.Policy
}

// denial is one refusal of the store.
type denial struct {
	cost      int64     // the refused cost: only a cost as large is answered
	expires   time.Time // until when it is answered
	retryAt   time.Time // when the store said cost may fit; zero: never (retry -1)
	resetAt   time.Time
	limit     int64
	remaining int64
}

// Stats are a Cache's counters, for INFO and /metrics.
type Stats struct {
	Entries int64 // refusals held now (expired ones included until they are replaced or evicted)
	Hits    int64 // requests answered from the cache, with no round trip
	Added   int64 // refusals of the store put in the cache
}

// New validates cfg and returns an empty Cache.
func New(cfg Config) (*Cache, error) {
	if cfg.Size < 0 || cfg.MaxTTL < 0 {
		return nil, errors.New("denycache: Size and MaxTTL must not be negative")
	}
	if cfg.Size == 0 {
		cfg.Size = DefaultSize
	}
	if cfg.MaxTTL == 0 {
		cfg.MaxTTL = DefaultTTL
	}
	d := &Cache{seed: maphash.MakeSeed(), maxTTL: cfg.MaxTTL}
	per := max(1, cfg.Size/shards)
	for i := range d.shards {
		d.shards[i], _ = lru.New[denyKey, denial](per)
	}
	return d, nil
}

func (d *Cache) shard(key string) *lru.Cache[denyKey, denial] {
	return d.shards[d.hash(key)%shards]
}

// Lookup answers a request of cost for key under p at now from a refusal
// still in force, reporting whether it did.
func (d *Cache) Lookup(key string, p *limit.Policy, cost int64, now time.Time) (limit.Result, bool) {
	if now.UnixNano() >= d.latest.Load() {
		return limit.Result{}, false
	}
	e, ok := d.shard(key).Peek(denyKey{key, p})
	if !ok || cost < e.cost || !now.Before(e.expires) {
		return limit.Result{}, false
	}
	r := limit.Result{Limit: e.limit, Remaining: e.remaining, RetryAfterMs: -1, ResetAfterMs: ceilMs(e.resetAt.Sub(now)), DecidedBy: limit.ByDenyCache}
	if cost <= p.Limit {
		if e.retryAt.IsZero() {
			return limit.Result{}, false // refused as cost > limit: this one is not
		}
		wait, ok := extra(p, cost-e.cost)
		if !ok {
			return limit.Result{}, false
		}
		r.RetryAfterMs = max(1, ceilMs(e.retryAt.Add(wait).Sub(now)))
		r.ResetAfterMs = max(r.ResetAfterMs, r.RetryAfterMs)
	}
	d.hits.Add(1)
	return r, true
}

// extra is how much later than n fewer tokens a request of n more fits,
// rounded down, under p; false when that is not known exactly. The
// buckets refill n tokens in n × Period / Rate; a fixed window admits
// them at the same boundary; a sliding window's wait for more is not a
// function of n alone, so only the refused cost itself is answered.
func extra(p *limit.Policy, n int64) (time.Duration, bool) {
	switch {
	case n == 0:
		return 0, true
	case p.Algorithm.IsBucket():
		hi, lo := bits.Mul64(uint64(n), uint64(p.Period))
		if hi >= uint64(p.Rate) {
			return 0, false
		}
		q, _ := bits.Div64(hi, lo, uint64(p.Rate))
		if q > math.MaxInt64/2 {
			return 0, false
		}
		return time.Duration(q), true
	case p.Algorithm == limit.FixedWindow:
		return 0, true
	}
	return 0, false
}

// Refused records the store's refusal r of cost for key under p, for a
// request sent at sent (before the store call), when Gen was gen. A
// refusal that would be answered for less than a millisecond is not kept,
// nor one that a Forget of key or a Clear since gen may have made stale.
func (d *Cache) Refused(key string, p *limit.Policy, cost int64, r *limit.Result, sent time.Time, gen uint64) {
	// Both times are rounded up by the script, which ran after sent: the
	// cache counts down from a millisecond less, so that it never reports
	// a later time than the store would.
	e := denial{cost: cost, limit: r.Limit, remaining: r.Remaining, resetAt: sent.Add(time.Duration(max(0, r.ResetAfterMs-1)) * time.Millisecond)}
	switch {
	case r.RetryAfterMs < 0:
		e.expires = sent.Add(d.maxTTL)
	case r.RetryAfterMs <= 1:
		return
	default:
		// The script ran after sent, and cost fits no earlier than
		// R − 1 ms after it (R is rounded up).
		e.retryAt = sent.Add(time.Duration(r.RetryAfterMs-1) * time.Millisecond)
		e.expires = sent.Add(min(d.maxTTL, time.Duration(r.RetryAfterMs-1)*time.Millisecond))
	}
	h := d.hash(key)
	if d.stale(h, gen) {
		return
	}
	sh := d.shards[h%shards]
	sh.Add(denyKey{key, p}, e)
	if d.stale(h, gen) { // a Forget of key ran meanwhile: it may have removed nothing yet
		sh.Remove(denyKey{key, p})
		return
	}
	d.added.Add(1)
	for exp := e.expires.UnixNano(); ; {
		cur := d.latest.Load()
		if exp <= cur || d.latest.CompareAndSwap(cur, exp) {
			break
		}
	}
}

// Forget drops the refusal of key under p, if any: RL.RESET of the key,
// or a give-back of this instance (an RL.MTAKE refund, an RL.ADJUST with
// a negative delta), made it stale.
func (d *Cache) Forget(key string, p *limit.Policy) {
	h := d.hash(key)
	d.forgot(h)
	d.shards[h%shards].Remove(denyKey{key, p})
}

// Clear drops every refusal, and keeps none whose request was sent
// before: the policies in force change (the policy holder's change hook
// calls it before the new ones are in force).
func (d *Cache) Clear() {
	d.forgot(allKeys)
	for _, c := range d.shards {
		c.Purge()
	}
}

// Stats returns the counters now.
func (d *Cache) Stats() Stats {
	s := Stats{Hits: d.hits.Load(), Added: d.added.Load()}
	for _, c := range d.shards {
		s.Entries += int64(c.Len())
	}
	return s
}

// ceilMs is d in whole milliseconds, rounded up, at least 0.
func ceilMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
