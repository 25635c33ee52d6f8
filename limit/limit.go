package limit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Algorithm names a rate-limiting algorithm. The zero value means TokenBucket.
type Algorithm string

// The algorithms a policy may name.
const (
	TokenBucket   Algorithm = "token_bucket"
	GCRA          Algorithm = "gcra"
	SlidingWindow Algorithm = "sliding_window"
	FixedWindow   Algorithm = "fixed_window"
)

// Pool is the internal algorithm of a region's share of a global budget:
// a pool of whole tokens that a background allocator fills (OpReturn) with
// tokens claimed from the home store, and that requests spend. It never
// refills by itself, and an absent key is an EMPTY pool, the opposite of
// the bucket algorithms. It is not in Algorithms: a config cannot name it;
// only the region layer builds Pool policies. PoolParams gives its
// parameters.
const Pool Algorithm = "pool"

// Algorithms lists every algorithm, the default first.
var Algorithms = []Algorithm{TokenBucket, GCRA, SlidingWindow, FixedWindow}

// IsBucket reports whether a is refilled continuously (token_bucket, gcra):
// Rate applies, and Bucket gives its parameters. The window algorithms
// count per Period instead, and Window gives theirs.
func (a Algorithm) IsBucket() bool { return a == "" || a == TokenBucket || a == GCRA }

// FailMode is what a policy does when the store cannot answer in time.
type FailMode string

// The failure policies.
const (
	FailOpen   FailMode = "open"   // admit
	FailClosed FailMode = "closed" // reject
	FailLocal  FailMode = "local"  // decide with an in-process bucket of local_share
)

// Values of Result.DecidedBy: which path answered.
const (
	ByStore          = "store"
	ByLease          = "lease"
	BySplit          = "split"
	ByEmbedded       = "embedded"
	ByFallbackOpen   = "fallback-open"
	ByFallbackClosed = "fallback-closed"
	ByFallbackLocal  = "fallback-local"
	ByOverloadOpen   = "overload-open"
	ByOverloadClosed = "overload-closed"
	ByOverloadLocal  = "overload-local"
	ByShadow         = "shadow"
	ByRegion         = "region"
	// ByDenyCache is a refusal answered on this instance from the deny
	// cache (package hotkey, Deny): the store refused the key a moment ago
	// and would refuse this request too.
	ByDenyCache = "deny-cache"
)

// DefaultTimeout is the deadline of a store call when nobody sets one: a
// config without timeout:, and the zero Timeout of the packages that call
// the store (cluster, hotkey, limiter). app supplies the one in force.
const DefaultTimeout = 50 * time.Millisecond

// MaxScaled is the largest integer a Lua number (an IEEE double) holds
// exactly. Every scaled quantity of a bucket must stay below it.
const MaxScaled = 1 << 53

// HotMode selects the hot-key path of a policy.
type HotMode string

// The hot-key modes.
const (
	HotOff   HotMode = "off"
	HotLease HotMode = "lease"
	HotSplit HotMode = "split"
)

// Hot configures hot-key handling for a policy. The zero value is off
// here; package policy gives a policy whose config names no hot mode the
// block of Policy.DefaultHot instead.
type Hot struct {
	Mode      HotMode
	Threshold int64 // requests/s on one instance before a key is hot
	Split     int   // K sub-buckets for HotSplit
	// Default is true when the config named no hot mode and this block is
	// DefaultHot's. An in-process store, which has no shard to spare,
	// leaves such a policy's keys to the store (package limiter).
	Default bool
}

// DefaultHotThreshold is the hot.threshold, in requests/s on one
// instance, of a lease or split policy that names none, and of the lease a
// policy without a hot mode gets from DefaultHot.
const DefaultHotThreshold = 500

// MinDefaultLeaseLimit is the smallest limit for which DefaultHot is a
// lease. A lease claims at most max(1, limit/16) tokens at once (package
// hotkey, MaxBlockDivisor), so below 32 a claim takes one token and saves
// no store call, while the deny cache, which hot keys do not use, answers
// a refused key's requests for up to 1 s per store call instead of a
// claim every lease TTL.
const MinDefaultLeaseLimit = 32

// DefaultHot returns the hot block of p when its config names no hot mode:
// lease at p's Hot.Threshold (DefaultHotThreshold when 0) where a lease
// applies and pays, that is for a bucket algorithm (token_bucket, gcra), a
// regional scope, not shadow (its counts stay the store's own, as for the
// deny cache) and a limit of at least MinDefaultLeaseLimit; otherwise off.
// Either way Default is true.
func (p *Policy) DefaultHot() Hot {
	if !p.Algorithm.IsBucket() || p.Global() || p.Shadow || p.Limit < MinDefaultLeaseLimit {
		return Hot{Mode: HotOff, Default: true}
	}
	return Hot{Mode: HotLease, Threshold: cmp.Or(p.Hot.Threshold, DefaultHotThreshold), Default: true}
}

// Policy is one rate-limiting rule. Policies are immutable once built;
// share them by pointer.
type Policy struct {
	Name      string
	Match     string    // glob on the key
	Algorithm Algorithm // zero means TokenBucket
	Limit     int64     // burst capacity in tokens, >= 1
	Rate      int64     // tokens refilled per Period, >= 1
	Period    time.Duration
	// OnStoreError is what happens when the store cannot answer.
	OnStoreError FailMode
	// OnOverload is what happens when the store is answering but too
	// slowly for the request's deadline (see OverloadMode); zero means the
	// default.
	OnOverload FailMode
	// LocalShare is the fraction of Limit and Rate that the FailLocal
	// bucket of one instance admits alone; zero means 1.0.
	LocalShare float64
	Shadow     bool
	Hot        Hot
	// NoDenyCache (deny_cache: false) keeps the policy's refusals out of
	// the deny cache: every request goes to the store. The zero value
	// uses it.
	NoDenyCache bool
	// Scope is where the policy's budget lives: ScopeRegional (zero) in
	// the store in front of which this instance runs; ScopeGlobal in the
	// home store, enforced per region from token batches (package region).
	Scope Scope
	// RegionFloor is the share of Limit and Rate a region admits alone
	// while it cannot reach the home store, once what it holds is spent:
	// zero means DefaultRegionFloor, NoRegionFloor none.
	RegionFloor float64
	// Space is the layer whose state the policy's buckets are: SpaceUser
	// (zero) for every policy of the config; the layers that derive
	// policies of their own (CL.THROTTLE, split sub-buckets, a region's
	// pools and floors) set theirs, and the stores keep each space's
	// states apart from every other's.
	Space Space
	// Calendar, when set (a fixed_window policy), makes the windows the
	// days, weeks (from Monday), months or years of Zone instead of
	// Period-long windows aligned to the epoch; see Calendar.
	Calendar Calendar
	// Zone is the time zone of Calendar; nil means UTC.
	Zone *time.Location
	// MaxTTL, for a Concurrency policy (max_ttl), is the longest ttl_ms
	// an RL.ACQUIRE may name, whole ms, at least Period; zero means
	// MaxSlotTTL.
	MaxTTL time.Duration
	// Durability (durability) is when a spend is answered: DurabilityNone
	// (zero) as soon as the primary has it; DurabilityReplica only once a
	// replica has acknowledged it too (WAIT), else by OnStoreError
	// (docs/durability.md).
	Durability Durability
}

// Durability says when a store answers a spend of a policy.
type Durability string

// The durabilities. The zero value is DurabilityNone.
const (
	DurabilityNone    Durability = "none"
	DurabilityReplica Durability = "replica"
)

// Durable reports whether p's spends wait for a replica (durability:
// replica).
func (p *Policy) Durable() bool { return p.Durability == DurabilityReplica }

// Space names the owner of a stored state: which layer keeps it, and so
// what it means. The stores map (Space, key) to their own keys
// injectively, so that no two spaces, and no two user keys, share a state
// (docs/architecture.md, "Keys in Redis: one owner per stored state"). Only SpaceUser can be reached by
// a key a client sends; the others are internal.
type Space uint8

// The spaces.
const (
	SpaceUser     Space = iota // the state RL.TAKE and every door keep for a user's key
	SpaceThrottle              // CL.THROTTLE's own GCRA state (the caller names the limit)
	SpaceSplit                 // a split hot key's sub-bucket; the key names the sub-bucket
	SpacePool                  // a region's pool of tokens claimed for a global key
	SpaceFloor                 // a region's floor bucket of a global key
	SpaceReceipt               // the receipts of a user key's takes (receipt.go); never a bucket's state
)

// String returns the space's name.
func (s Space) String() string {
	switch s {
	case SpaceUser:
		return "user"
	case SpaceThrottle:
		return "throttle"
	case SpaceSplit:
		return "split"
	case SpacePool:
		return "pool"
	case SpaceFloor:
		return "floor"
	case SpaceReceipt:
		return "receipt"
	}
	return fmt.Sprintf("space(%d)", uint8(s))
}

// Scope is where a policy's budget is kept.
type Scope string

// The scopes.
const (
	ScopeRegional Scope = "regional"
	ScopeGlobal   Scope = "global"
)

// Global reports whether p's budget is global (scope: global).
func (p *Policy) Global() bool { return p.Scope == ScopeGlobal }

// DefaultRegionFloor is the region_floor of a policy that sets none, and
// NoRegionFloor the value of an explicit region_floor: 0.
const (
	DefaultRegionFloor = 0.1
	NoRegionFloor      = -1.0
)

// Floor returns the policy a region cut off from the home store decides
// with once its allocation is spent: Limit and Rate scaled by RegionFloor,
// rounded down but never below 1; nil when the floor is 0.
func (p *Policy) Floor() *Policy {
	f := p.RegionFloor
	switch {
	case f == 0:
		f = DefaultRegionFloor
	case f < 0:
		return nil
	}
	q := *p
	q.Scope, q.LocalShare, q.Hot, q.Space = ScopeRegional, 1, Hot{Mode: HotOff}, SpaceFloor
	if f < 1 {
		q.Limit = max(1, int64(math.Floor(float64(p.Limit)*f)))
		q.Rate = max(1, int64(math.Floor(float64(p.Rate)*f)))
	}
	return &q
}

// OverloadMode is the failure policy of a request the store could not take
// in time because its node's queue was too long: OnOverload when set;
// else OnStoreError, except that open becomes local. A surge is when a
// limit is needed most, so it never switches limiting off unless the
// policy says so in as many words (on_overload: open).
func (p *Policy) OverloadMode() FailMode {
	switch {
	case p.OnOverload != "":
		return p.OnOverload
	case p.OnStoreError == FailOpen:
		return FailLocal
	}
	return p.OnStoreError
}

// Bucket is a token bucket in exact integer units. A token is Scale units;
// the bucket refills Refill units per microsecond and holds at most
// Capacity units. Scale and Refill are Period (in µs) and Rate divided by
// their greatest common divisor, so any rate from 1 per day to tens of
// millions per second is exact, with no rounded emission interval.
type Bucket struct {
	Capacity int64 // Limit × Scale
	Refill   int64 // units per µs
	Scale    int64 // units per token
	Limit    int64 // tokens
}

// Bucket returns the policy's exact integer parameters, or an error when the
// policy cannot be represented exactly (Capacity must stay below MaxScaled).
func (p *Policy) Bucket() (Bucket, error) {
	us, err := p.rated()
	if err != nil {
		return Bucket{}, err
	}
	g := gcd(p.Rate, us)
	b := Bucket{Refill: p.Rate / g, Scale: us / g, Limit: p.Limit}
	if b.Scale > MaxScaled/p.Limit {
		return Bucket{}, fmt.Errorf("limit %d with %d per %s needs more than 53 bits of precision; use a shorter period or a rate that divides it", p.Limit, p.Rate, p.Period)
	}
	if b.Refill > MaxScaled/1000 {
		return Bucket{}, fmt.Errorf("rate %d per %s is too high to represent exactly", p.Rate, p.Period)
	}
	b.Capacity = p.Limit * b.Scale
	return b, nil
}

// rated checks what a bucket and a pool both need of the policy, a limit
// and a rate of at least 1 and a period of whole microseconds, and returns
// the period in µs.
func (p *Policy) rated() (int64, error) {
	if p.Limit < 1 {
		return 0, errors.New("limit must be at least 1")
	}
	if p.Rate < 1 {
		return 0, errors.New("rate must be at least 1")
	}
	if p.Period < time.Microsecond || p.Period%time.Microsecond != 0 {
		return 0, errors.New("period must be a whole number of microseconds, at least 1µs")
	}
	return int64(p.Period / time.Microsecond), nil
}

// PoolParams is a Pool's parameters in exact integers: Limit whole tokens
// at most (the pool never holds more), TokenUs µs per token at the
// policy's rate (for retry_after_ms and reset_after_ms, the time the home
// bucket takes to give back what is missing), and TTLMs, the TTL of a
// written pool in ms: a pool unused for that long is gone, as its tokens
// would have refilled at home by then.
type PoolParams struct {
	Limit   int64 // tokens, >= 1
	TokenUs int64 // µs per token: ceil(Period / Rate), at least 1
	TTLMs   int64 // max(10,000, ceil(Limit × TokenUs / 1000) + 1000)
}

// Pool returns the policy's pool parameters, or an error when the policy
// cannot be represented exactly (Limit × TokenUs must stay below
// MaxScaled).
func (p *Policy) Pool() (PoolParams, error) {
	us, err := p.rated()
	if err != nil {
		return PoolParams{}, err
	}
	tokenUs := us / p.Rate
	if us%p.Rate != 0 {
		tokenUs++ // rounded up: a retry is never early
	}
	if tokenUs > (MaxScaled-1)/p.Limit {
		return PoolParams{}, fmt.Errorf("limit %d with %d per %s needs more than 53 bits of precision; use a shorter period or a higher rate", p.Limit, p.Rate, p.Period)
	}
	full := p.Limit * tokenUs // µs to refill the whole pool at home
	return PoolParams{Limit: p.Limit, TokenUs: tokenUs, TTLMs: max(10_000, (full+999)/1000+1000)}, nil
}

// Share returns the policy scaled by LocalShare, as used by the FailLocal
// bucket: limit and rate are rounded down but never below 1.
func (p *Policy) Share() *Policy {
	f := p.LocalShare
	if f <= 0 || f >= 1 {
		return p
	}
	q := *p
	q.Limit = max(1, int64(math.Floor(float64(p.Limit)*f)))
	q.Rate = max(1, int64(math.Floor(float64(p.Rate)*f)))
	return &q
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Op is what a Request asks of the store.
type Op uint8

// The operations.
const (
	OpTake   Op = iota // spend Cost tokens if they exist
	OpPeek             // report as OpTake would, spending nothing
	OpClaim            // lease: take up to Cost whole tokens, as many as exist (a partial grant); Result.Granted says how many
	OpReturn           // lease: give Cost unused tokens back, never above the limit
	// OpAdjust (RL.ADJUST) corrects what was spent: Cost is the signed
	// delta. Above 0 it spends Cost more without a check, down into debt
	// (see Policy.Adjustable); below 0 it gives -Cost back, never above
	// the limit, to the state the take that Request.Receipt names came
	// from (receipt.go), at most that take's cost and once: a negative
	// delta without a receipt is refused with ErrReceiptMissing. (The
	// algorithms, local.Decide and the single-key scripts, know a negative
	// delta as a give-back to the state in force now; only the receipt
	// paths of the stores reach it.)
	OpAdjust
)

// Request asks for one decision. Key is the user's key; the store maps it
// to its own key layout.
type Request struct {
	Key    string
	Cost   int64
	Op     Op
	Policy *Policy // filled by the limiter before the store sees it
	// Window, for an OpReturn under a window algorithm, names the window
	// the tokens were taken in: the Result.Window of their take. A return
	// to a window that has closed gives nothing back (a refund never
	// credits another window); 0 means the current one.
	Window int64
	// Hold, for an OpClaim under a bucket algorithm, holds the bucket
	// until |Hold| (µs since the epoch, the store's clock): nothing
	// refills before it. A positive Hold starts a hold only when none is
	// in force, a negative one extends the hold in force; a Hold in the
	// past (1) only asks. Result.Window is the hold in force before the
	// claim (0: none). A split hot key's main bucket is held while its
	// sub-buckets hold its budget, so that no other path spends it twice.
	Hold int64
	// WantReceipt, on an OpTake (RL.TAKE … RECEIPT), asks for a receipt:
	// the limiter gives the take a new id in Receipt (NewReceipt), which
	// the store records with the take when it admits it.
	WantReceipt bool
	// Receipt is, on an OpTake, the id to record the take under ("" for
	// none); on an OpAdjust of a negative delta, the receipt of the take
	// it gives back (required there, see receipt.go). The limiter binds
	// both to User (BindReceipt) before the store sees them.
	Receipt string
	// User is the name of the user the door authenticated the request's
	// client as ("" where a door has no users). Only receipts read it: a
	// receipt is good only for the user whose take it names.
	User string
}

// Result is one decision, the six fields of the RL.TAKE reply, or Err.
type Result struct {
	Allowed      bool
	Limit        int64
	Remaining    int64
	RetryAfterMs int64 // -1 when allowed, or when Cost > Limit
	ResetAfterMs int64
	DecidedBy    string
	// Granted is the tokens an OpClaim took (0..Cost).
	Granted int64
	// Window is, under a window algorithm, the start of the window the
	// decision fell in, µs on the store's clock (what an OpReturn of this
	// take names in Request.Window); 0 for the bucket algorithms.
	Window int64
	// Receipt is the receipt of an admitted take that asked for one and
	// that the store recorded (Request.Receipt); "" otherwise: refused, or
	// answered without the store (a fallback, the deny cache, a hot path).
	Receipt string
	Err     error
}

// Store decides batches of requests. Implementations must be safe for
// concurrent use. Do fills out[i] for reqs[i]; len(out) == len(reqs). A
// failure of one item is reported in its Result.Err, never by a panic.
type Store interface {
	Do(ctx context.Context, reqs []Request, out []Result)
	// Reset forgets the state of key; it reports whether there was any.
	Reset(ctx context.Context, key string, p *Policy) (bool, error)
	Close() error
}

// Errors shared across packages.
var (
	// ErrUnavailable marks connectivity failures of the store: timeouts,
	// refused or reset connections, CLUSTERDOWN, TRYAGAIN. Only these go to
	// a policy's OnStoreError.
	ErrUnavailable = errors.New("store unavailable")
	// ErrNoPolicy is returned when no policy matches a key.
	ErrNoPolicy = errors.New("no policy matches key")
)

// UnavailableError is a connectivity failure of one store node.
// errors.Is(err, ErrUnavailable) holds for it.
type UnavailableError struct {
	Node string
	Err  error
}

func (e *UnavailableError) Error() string {
	if e.Node == "" {
		return "store unavailable: " + e.Err.Error()
	}
	return "store unavailable: node " + e.Node + ": " + e.Err.Error()
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Is reports ErrUnavailable as a match.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// ErrOverload marks a request the store did not send because its node's
// queue would outlast the request's deadline: the node is answering, only
// not fast enough for everyone. errors.Is(err, ErrUnavailable) holds too,
// so every path that falls back on unavailability falls back on overload;
// the limiter picks the policy's OverloadMode for it.
var ErrOverload = errors.New("store overloaded")

// OverloadError is an overload of one store node.
type OverloadError struct {
	Node string
	Wait time.Duration // the expected wait in the node's queue, or the time waited
	Left time.Duration // what was left of the request's deadline; 0 when it passed
}

func (e *OverloadError) Error() string {
	if e.Left <= 0 { // queued or sent, and the deadline came first
		return fmt.Sprintf("store overloaded: node %s: no reply after %s", e.Node, e.Wait.Round(time.Microsecond))
	}
	return fmt.Sprintf("store overloaded: node %s: expected wait %s, %s left", e.Node, e.Wait.Round(time.Microsecond), e.Left.Round(time.Microsecond))
}

// Is reports ErrOverload and ErrUnavailable as matches.
func (e *OverloadError) Is(target error) bool {
	return target == ErrOverload || target == ErrUnavailable
}

// frontKey is the context key of WithFront.
type frontKey struct{}

// WithFront returns ctx marked with the door a request came in by ("resp",
// "http", "grpc"), for the decision metrics' front label. Set it once per
// server or connection, not per request: it allocates.
func WithFront(ctx context.Context, front string) context.Context {
	return context.WithValue(ctx, frontKey{}, front)
}

// FrontOf returns the door of ctx, "resp" when none is set.
func FrontOf(ctx context.Context) string {
	if f, ok := ctx.Value(frontKey{}).(string); ok {
		return f
	}
	return "resp"
}

// Atomic is implemented by stores that can decide several requests
// all-or-nothing in one atomic step when their keys share a group (in
// Redis Cluster, a hash slot).
type Atomic interface {
	// Group returns the group of key's state under p (its Space decides
	// where the state lives): requests whose states share it may go to
	// DoAll together.
	Group(key string, p *Policy) int
	// DoAll takes every request of reqs, all of one group, or none. When
	// every one is admitted it fills out with the takes and reports true;
	// otherwise nothing is spent and out holds what a peek of each would
	// report. A failure is reported in every out[i].Err.
	DoAll(ctx context.Context, reqs []Request, out []Result) bool
}
