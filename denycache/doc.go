// Package denycache is the deny cache of one sluice instance: it answers,
// on this instance and without a round trip, the requests of a key the
// store refused a moment ago and would refuse again (docs/hotkeys.md, "The
// deny cache"). An abusive key that keeps knocking after its limit then
// costs its shard one script call per MaxTTL per instance, not one per
// request. The limiter uses a Cache through limiter.DenyCache, for every
// policy that allows it (not only those with a hot block).
//
// A refusal of cost c with retry R is answered for min(R − 1 ms, MaxTTL),
// keyed by key and policy pointer, for the costs where that is exact per
// algorithm (see Cache). It holds at most Size refusals whatever the
// number of keys; its lookup takes no lock while nothing refused is live,
// and a read lock of one of 16 shards while something is (the one lock on
// a cold key's path, and only under refusals).
//
// What it must not do: admit. It only refuses, so it never over-admits,
// and it must never refuse what the store would admit but within the
// documented bound: a give-back or an RL.RESET on another instance, for
// at most MaxTTL. Whatever may have added tokens on this instance is
// told to it: Forget for the key (RL.RESET, a refund, a negative
// RL.ADJUST) and Clear for every key (a change of the policies in force,
// called by the policy holder's change hook, never by a policy lookup); a
// refusal whose request was sent before either is not kept. It neither
// calls the store nor reads a clock: the caller records the store's
// refusals and passes the time.
package denycache
