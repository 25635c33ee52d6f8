// Package layercheck is the cross-layer checker of issue 20: a stateful
// property test (pgregory.net/rapid) that drives two real sluice processes
// (region eu, a 3+3 Redis Cluster, a home redis-server, all three doors)
// through every layer that writes Redis state — the four algorithms, a
// calendar quota (a Kolkata day, changed at run time to a New York month
// and to a 1-day fixed_window) and concurrency slots, hot
// keys in lease and split mode, RL.MTAKE, CL.THROTTLE, shadow policies,
// runtime policies, SIGHUP reloads, a global policy, receipts and their
// give-backs — as two users of an aclfile, and checks the invariant of
// docs/architecture.md ("The bound every layer keeps") from the replies
// alone: per user key, admitted over any interval T is at most limit +
// rate × T (windows: limit per window) plus the costs of the valid
// receipts given back (an applied RL.ADJUST of a negative delta naming
// the receipt of an admitted take of that key, once, at most its cost:
// credited). Nothing else raises the bound: a give-back without a valid
// receipt earns nothing, whatever it was answered, and one the contract
// refuses that was answered as applied is a violation of its own (kind
// receipt).
//
// # Two tenants
//
// The owner (user owner: every command, every key) runs the workload.
// The rival (user rival: @limit @slot @adjust @read on ev.* only) sends
// on the owner's keys every command it may not run, through RESP, HTTP
// and gRPC: takes (with and without RECEIPT), peeks, RL.MTAKE,
// CL.THROTTLE, give-backs with no receipt, the owner's or a forged one,
// spends, RL.ACQUIRE, RL.RELEASE with the owner's or a guessed token,
// RL.RESET, RL.POLICY SET|DEL; each must be refused (NOPERM, HTTP 403,
// gRPC PermissionDenied), or it is a permission violation, and an
// admission among them is booked as one. A refused command changes
// nothing: a refused reset or policy change is not known to the bound,
// and the owner's peeks before and after a refused take on a bucket or
// window key (off the hot and global paths, no change of its policy under
// way) must show nothing spent. On its own keys the rival takes with receipts
// and gives back with its own (valid or used), its other key's, the
// owner's, forged ones or none; holds ev.cc slots (slots held ≤ limit as
// for cc) and releases with guessed or the owner's tokens (must answer
// 0); and sends RL.MTAKE across the tenants, refused whole, its own key
// unspent.
//
// The non-test code is the bookkeeping: what was admitted when (KeyLog),
// which policy variants were in force when (Tracker), and Check, which
// turns them into violations. It never talks to Redis or sluice; the test
// does.
//
// # Running
//
//	go test ./internal/layercheck                  # bounded: LAYERCHECK_DURATION, default 25s, then shrinking
//	make check-long                                # 10 minutes, every violation recorded, one failure at the end
//	LAYERCHECK_DURATION=2m go test -v -run TestLayers ./internal/layercheck
//	LAYERCHECK_KEEPGOING=1                         # record violations by category instead of failing at the first
//	LAYERCHECK_SKIP=throttle,grpc LAYERCHECK_PLAIN=1 # leave actions out, spell keys plainly: tell one bug from another
//	LAYERCHECK_NOACL=1                             # no aclfile, as before users: the rival is everyone (its checks fail)
//
// rapid's own flags work (-rapid.seed, -rapid.steps, -rapid.shrinktime);
// the test's defaults are 25 steps, 20 s of shrinking, no fail files. Every
// run ends with one summary line: operations by kind, keys, violations,
// inconclusive keys, decided_by counts, the region excess, the most slots
// held, the rival's refusals (and spend probes) and the give-backs by
// receipt mode (applied/refused).
//
// # How the check stays conservative
//
// A decision happened at some moment in [sent, recv] of its request. For
// bucket policies every interval [sent_i, recv_j] is checked, counting the
// admissions that lie wholly inside it, against limit + rate × (recv_j −
// sent_i): the longest the real interval can be, so timing never makes a
// false violation. Windows count an admission only when its whole
// [sent, recv] lies inside one window (epoch-aligned, or the calendar
// window of a calendar policy's zone). A policy change is
// in force from the moment it was sent until it reached every instance
// (runtime policies: 1.5 s after the reply; SIGHUP: 100 ms after the reload
// is logged), and an interval is bounded by the largest limit and the
// largest rate of every variant in force during it; a window policy, where
// it meets a bucket policy, counts as a bucket of 2 × limit refilled at
// limit per period. RL.RESET splits a key's history; admissions that
// overlap a reset (plus 300 ms for hot and global keys: other instances'
// leases, claims in flight) count nowhere. Lease admissions get 300 ms more
// interval (1.5 lease TTLs and margin): a leased token left the bucket
// before it was admitted. Shadow decisions are not counted. A key is
// inconclusive (counted, not checked) only for KeyLog.Fallback's reasons,
// such as a reset the store may or may not have done.
//
// Fallback and overload decisions are checked, each on its own
// (docs/reliability.md, "Bounds under faults"): the store's own paths
// (store, lease, split, region) must keep the bound above plus the own
// allowance of every fault whose window [From, To + settle] overlaps the
// interval (a kill of a durability none policy: the store spends in flight
// in [HeldBack − λ, From + λ], leased ones up to the lease slack after;
// a restart empty: one limit; every other kind: nothing); each instance's
// fallback-local and overload-local admissions (one bucket) its
// local_share bucket, max(1, floor(local_share × limit)) plus its rate
// (windows: per window), one burst more per restart of that instance
// (kind local-share); open ones are their own allowance; a closed one, or a
// fallback whose mode no policy in force has, is a violation (kind
// fallback-mode). Node faults touch a key when its Slots meet theirs (or
// either is unknown), a sluice kill every key, a home store down only
// global keys; timing is read as above, the widest the truth allows. A
// global key may exceed its bound by its region floor's own limit + rate ×
// T at any time (a key new to an instance is decided by it too): reported
// as the region excess, not a violation. Every interval's admissions past
// the fault-free bound, within the whole allowance, are an Excess,
// attributed to the overlapping fault with the largest own allowance (on
// a tie by kind, then the earliest: see rank), else to "fallback", else to
// "region"; FaultTable prints the worst per kind.
//
// A concurrency policy (cc, algorithm: concurrency) is driven by the
// acquire, acquire-burst and release actions, through RESP and HTTP, on
// both instances: "slots held ≤ limit at every moment" is checked from the
// replies (CheckSlots). A slot counts only while it was certainly held,
// from the acquire's answer to the earlier of the release's send and the
// acquire's send plus its TTL, so timing never makes a false violation. A
// release of a slot whose TTL cannot have passed must answer 1, and a
// token under the other cc key must free nothing.
package layercheck
