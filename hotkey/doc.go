// Package hotkey keeps one viral key from melting one Redis shard. It
// detects the keys this instance sees too often (Observe), and decides their
// requests (Decide) either from tokens leased in blocks from the key's
// shared bucket, or from K sub-buckets spread over K slots, as each policy's
// `hot` block says. It works over any limit.Store and imports only limit.
//
// It must not admit more than the policy allows in lease mode, must not
// hold state that grows with the number of distinct keys, and must not put
// a lock or an allocation on the path of a cold key.
//
// # Detection
//
// Per instance: a blocked count-min sketch of the current and the previous
// second (the previous weighted by the share of it still inside the last
// second), 2 MiB whatever the number of keys, counted with atomics. A key
// turns hot when its rate reaches the policy's hot.threshold (req/s on this
// instance) and cools once it has stayed below threshold/2 for a second
// (hysteresis), or has had no request for a second and is below
// threshold/2. At most Config.MaxHot keys (1024) are hot at once; a key
// beyond that is decided by the store as if cold. The hot map is read with
// one atomic load (copy-on-write), so Observe takes no lock. A hot key with
// a threshold of 1024 req/s or more is counted by sampling (1 in 2^n
// requests, counted as 2^n, at least 256 counted a second at threshold/2),
// so that all cores do not increment the same counters.
//
// # Lease (hot.mode: lease)
//
// The instance claims a block of tokens from the key's one shared bucket in
// one store call (limit.OpClaim; a partial grant when fewer remain) and
// answers takes from them without a round trip, decided_by lease. Only one
// claim per key is in flight per instance; other takes wait for it, bounded
// by their context (past it: an unavailable error), then try the lease
// again. A block is this instance's arrival rate for the key × the lease
// TTL, at least the request's cost, at most max(1, limit/16) (see
// MaxBlockDivisor): one instance never holds more than 1/16 of the burst
// unless one request costs more, so sixteen instances can hold full leases
// before leases alone drain the bucket, and the last tokens are shared out
// by partial grants. Tokens unused for the lease TTL (100ms) go back
// (limit.OpReturn, capped at the limit) within 1.5 TTLs; so do the tokens of
// a lease evicted from the bounded lease cache (golang-lru/v2), and all of
// them on Close.
//
// Every leased token was taken from the shared bucket, so leases never
// over-admit: across all instances, admitted ≤ limit + rate × elapsed. They
// can under-admit by what other instances hold unused (at most one block
// each, for at most 1.5 lease TTLs), and by returns capped at a full bucket.
// When a claim finds no whole token, the instance rejects takes of that key
// without a round trip until the time the store said a token would exist,
// so a flood of rejected requests does not reach the shard either. After a
// partial grant it waits between one and two token intervals (at random)
// before claiming again, which keeps the instance that last won a token from
// winning every refill.
//
// Reply of a lease decision: limit is the policy's; remaining is an
// estimate, the shared bucket's remaining at the last claim plus the tokens
// this instance still holds; reset_after is the time to refill that
// estimate; retry_after is -1 when admitted, else the time until the last
// claim said a token exists plus the time for the rest of cost, never 0.
// If the store fails, tokens already held are still served; after that the
// claim's error is returned in Result.Err, so the limiter applies the
// policy's on_store_error.
//
// # Split (hot.mode: split)
//
// The key's budget is divided among K = hot.split sub-buckets whose user
// keys "{s<i>:" + key + "}" carry different hash tags (always starting with
// "s<i>:", also when key has a tag of its own), so they hash to different
// slots: with K = 8, two share a slot with probability about 0.2%.
// Sub-bucket i gets limit/K and rate/K, plus one when i < limit%K (resp.
// rate%K): the sub-buckets sum exactly to the policy. K is at most limit and
// rate so that each sub-bucket gets at least one; a policy that cannot be
// split in two is decided by the store. A request goes to a random
// sub-bucket and, if rejected there (or if that node does not answer),
// tries one other before it is rejected. A cost that fits only the larger
// sub-buckets goes to them; a cost above every sub-bucket's limit can never
// be served while the key is hot and is rejected with retry_after -1, as
// cost > limit is.
//
// Reply of a split decision, decided_by split: limit is the policy's;
// remaining is the answering sub-bucket's remaining × K (an estimate: the
// other sub-buckets are not read), capped at the limit; retry_after and
// reset_after are the answering sub-bucket's.
//
// Bounded error of split. While instances agree that the key is hot, split
// never over-admits: the sub-budgets sum to the budget. It under-admits when
// load is uneven across sub-buckets: a request is rejected while another
// sub-bucket it did not try still has tokens; the second try bounds this.
// It is not exact at the edges: hot-ness is decided per instance, so the
// main bucket (used by instances that see the key as cold) and the
// sub-buckets (used by those that see it hot) both admit while instances
// disagree, and the sub-buckets start full when a key turns hot (and the
// main bucket has refilled when it cools): up to one extra burst at each
// switch. Lease mode, which draws on the one shared bucket, has neither
// error; prefer it when exactness matters more than shard load.
package hotkey
