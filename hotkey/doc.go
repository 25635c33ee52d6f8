// Package hotkey keeps one viral key, or one abusive one, from melting one
// Redis shard. It detects the keys this instance sees too often (Observe), and decides their
// requests (Decide) either from tokens leased in blocks from the key's
// shared bucket, or from K sub-buckets spread over K slots, as each policy's
// `hot` block says (a policy without one has limit.Policy.DefaultHot: lease
// where it applies). It works over any limit.Store and imports only limit.
//
// It must not admit more than the policy allows in lease mode, must not
// hold state that grows with the number of distinct keys, and must not put
// a lock or an allocation on the path of a cold key.
//
// # Detection
//
// Per instance: a blocked count-min sketch of the current and the previous
// second (the previous weighted by the share of it still inside the last
// second), 2 MiB whatever the number of keys, counted with atomics. No
// request clears a window: each cache line of counters carries the second
// it counts, and the first request into it in a new second zeroes that one
// line (O(1)), so no request stalls at a second's boundary. A key
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
// by their context (past it: an overload error, limit.ErrOverload, so
// on_overload applies), then try the lease again. A block is this instance's arrival rate for the key × the lease
// TTL, at least the request's cost, at most max(1, limit/16) (see
// MaxBlockDivisor): one instance never holds more than 1/16 of the burst
// unless one request costs more, so sixteen instances can hold full leases
// before leases alone drain the bucket, and the last tokens are shared out
// by partial grants. Tokens unused for the lease TTL (100ms) go back
// (limit.OpReturn, capped at the limit) within 1.5 TTLs; so do the tokens of
// a lease evicted from the bounded lease cache (golang-lru/v2), and all of
// them on Close. A lease answers for one TTL after its last claim, no
// longer: a take that finds it older expires it at once (its tokens go
// back) and claims again, so a change to the shared bucket that the lease
// cannot see, such as an RL.RESET on another instance, shows within one
// TTL. A lease's tokens admit only under the policy they were claimed under
// while the policies in force stay the same (Layer.PoliciesChanged): a
// change drops them, unreturned, and a claim in flight across it.
//
// Every leased token was taken from the shared bucket, so leases never
// over-admit: across all instances, admitted ≤ limit + rate × elapsed. They
// can under-admit by what other instances hold unused (at most one block
// each, for at most 1.5 lease TTLs), and by returns capped at a full bucket.
// When a claim finds no whole token, the instance rejects takes of that key
// without a round trip until the time the store said a token would exist
// (or the lease's TTL ends, if sooner), so a flood of rejected requests
// does not reach the shard either. After a partial grant it waits between
// one and two token intervals (at random) before claiming again, which
// keeps the instance that last won a token from winning every refill.
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
// keys "{<tag_i>:" + key + "}" carry different hash tags (always starting
// with "<tag_i>:", also when key has a tag of its own), so they hash to
// different slots. tag_i is fixed, the same on every instance: 8 base-32
// characters of splitmix64(i). Tags that differ in one character, such as
// "s0:" … "s7:", would not do: the slot is a CRC16, which is linear, so
// their slots differ only in a few low bits and all land on one primary.
// Tags that differ in many bits move the sub-buckets' slots independently
// over the slot space. With K = 8, all eight fall in one third of the
// slots (one primary of three) for about 0.05% of keys; whether two share
// a slot depends only on the length of the key (up to its first '}'):
// about 0.2% of lengths, none below 300 bytes.
//
// Sub-bucket i gets limit/K and rate/K, plus one when i < limit%K (resp.
// rate%K): the sub-buckets sum exactly to the policy. K is at most limit and
// rate so that each sub-bucket gets at least one; a policy that cannot be
// split in two is decided by the store.
//
// When a key turns hot on an instance, its first split decision there
// hands the budget over (see handoff): the instance claims what is left in
// the main bucket (limit.OpClaim of the limit; the G tokens granted are
// discarded) and holds it (limit.Request.Hold, for HoldFor): nothing
// refills a held bucket. The instance that starts the spell (no hold was
// in force) brings every sub-bucket down to its share of G, so that the
// sub-buckets together hold what the main bucket held, not a fresh burst
// nor what a past spell left in them, and then renews the hold with an odd
// value, which marks the spell ready. An instance that finds a hold in
// force joins the spell and leaves the sub-buckets alone, at once when
// the spell is ready, else after asking again until it is (every
// millisecond, at most 64 times, within the request's context). An
// instance renews its hold on split decisions once half of it is left.
// The key's other requests on this instance wait for the hand-over,
// bounded by their own context (past it: an overload error), as for a
// lease claim. A sub-bucket the hand-over could not read is claimed as if
// full, a failed claim goes once more. A hand-over never splits over
// sub-buckets it has not seen set: when the main claim fails, a
// sub-bucket claim fails twice, or the spell it joins is still not ready,
// it fails, its requests get an unavailable error, and the key's next
// request tries it again (a hold in force that this instance asked for
// is its own: it still starts the spell, with the G its first claim got).
// Before, such a hand-over split at once over sub-buckets that, never
// written, read as full: the checker's hs.i69.a admitted 6 from them
// where the main bucket held 0.6.
//
// A request goes to a random sub-bucket and, if rejected there (or if that
// node does not answer), tries one other before it is rejected. A cost that
// fits only the larger sub-buckets goes to them; a cost above every
// sub-bucket's limit can never be served while the key is hot and is
// rejected with retry_after -1, as cost > limit is.
//
// Reply of a split decision, decided_by split: limit is the policy's;
// remaining is the answering sub-bucket's remaining × K (an estimate: the
// other sub-buckets are not read), capped at the limit; retry_after and
// reset_after are the answering sub-bucket's.
//
// Bounded error of split. It never over-admits: while the spell lasts the
// main bucket is held, so every other path to it (RL.MTAKE, which does not
// use the hot path; an instance where the key is not hot) finds it empty,
// and the sub-budgets sum to the budget; when every instance has cooled,
// the hold ends within HoldFor and the main bucket refills from empty.
// (The hold is a time on this instance's clock: skew between it and the
// main bucket's shard, times the rate, is the one excess.) It
// under-admits when load is uneven across sub-buckets (a request is
// rejected while another sub-bucket it did not try still has tokens; the
// second try bounds this), for requests on other paths during a spell,
// for up to HoldFor × rate after one, and by one token per sub-bucket that
// was not exactly full at a hand-over (it may hold a fraction of a token
// that no claim takes, so it gets one token less than its share; one whose
// share is 0 is emptied, fraction and all, by a claim that holds it for
// one token interval, which costs the same token). Lease mode, which draws on the
// one shared bucket, has none of these; prefer it when exactness for every
// path matters more than shard load.
//
// # Reset
//
// RL.RESET of a hot key (Reset, after the store has reset the key) deletes
// its split sub-buckets in the store and leaves them empty (the reset's one
// fresh budget is the main bucket's; the next spell gives each its share)
// and, on this instance, drops its
// lease (tokens and the wait of an empty claim; the tokens came from the
// bucket just reset, so they are dropped, not given back) and its hot
// entry. Other instances' leases answer for at most one lease TTL after
// their last claim.
package hotkey
