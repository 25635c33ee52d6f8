package algotest

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// SlotStep is one RL.ACQUIRE (or, with Release, RL.RELEASE; with Rate, a
// rate decision) at T0 + At µs on a concurrency limit, and what it must
// get.
type SlotStep struct {
	At      int64 // µs after T0
	Release bool
	// Rate, when set, makes the step a rate decision of Cost under Op on
	// the same key with this (rate) policy, as a key whose policy changed
	// algorithm sees: only Want.Allowed is checked.
	Rate  *limit.Policy
	Op    limit.Op
	Cost  int64
	Token string
	TTLMs int64 // an acquire's ttl_ms; 0 means the policy's period
	// Policy, when set, replaces the vector's policy from this step on.
	Policy *limit.Policy
	Want   Want // an acquire's reply (Granted unused)
	Held   bool // a release's reply: the slot was held
	// TTL, when not 0, is the key's TTL in ms after the step (NoKey: no
	// key), checked by runners that can read TTLs.
	TTL int64
}

// SlotVector is a named sequence of slot steps on one fresh key.
type SlotVector struct {
	Name   string
	Policy *limit.Policy
	Steps  []SlotStep
}

// Slots is one implementation of the concurrency algorithm under test, at
// now (µs since the epoch).
type Slots struct {
	Acquire func(t *testing.T, key string, p *limit.Policy, token string, ttlMs, now int64) limit.Result
	Release func(t *testing.T, key string, p *limit.Policy, token string, now int64) bool
	// Decide is the same implementation's rate decision (the one table's
	// Decide) on the same keys, for the steps with Rate.
	Decide func(t *testing.T, key string, p *limit.Policy, cost int64, op limit.Op, now int64) limit.Result
	TTL    TTL // nil: TTLs are not checked
}

// Concurrency is the table for algorithm concurrency: Want's Remaining is
// the free slots after an acquire, RetryAfter the ms until the earliest
// held slot frees, ResetAfter until every held slot frees.
var Concurrency = []SlotVector{
	{
		Name:   "fill, refuse, a release frees a slot at once",
		Policy: cc(2, time.Second),
		Steps: []SlotStep{
			{Token: "a", Want: Want{true, 1, -1, 1000, 0}, TTL: 2000},
			{At: 100 * ms, Token: "b", Want: Want{true, 0, -1, 1000, 0}, TTL: 2000},
			{At: 200 * ms, Token: "c", Want: Want{false, 0, 800, 900, 0}},
			{At: 300 * ms, Release: true, Token: "a", Held: true},
			{At: 300 * ms, Release: true, Token: "a", Held: false},
			{At: 300 * ms, Token: "c", Want: Want{true, 0, -1, 1000, 0}, TTL: 2000},
			{At: 400 * ms, Release: true, Token: "b", Held: true},
			{At: 400 * ms, Release: true, Token: "c", Held: true, TTL: NoKey},
			{At: 500 * ms, Token: "d", Want: Want{true, 1, -1, 1000, 0}},
		},
	},
	{
		Name:   "slots free themselves after their ttl",
		Policy: cc(2, time.Second),
		Steps: []SlotStep{
			{Token: "a", TTLMs: 500, Want: Want{true, 1, -1, 500, 0}, TTL: 1500},
			{Token: "b", TTLMs: 500, Want: Want{true, 0, -1, 500, 0}},
			{At: 500*ms - 1, Token: "c", Want: Want{false, 0, 1, 1, 0}},
			{At: 500 * ms, Token: "c", Want: Want{true, 1, -1, 1000, 0}},
			{At: 500 * ms, Release: true, Token: "a", Held: false},
			{At: 500 * ms, Release: true, Token: "b", Held: false},
			{At: 600 * ms, Token: "d", TTLMs: 1, Want: Want{true, 0, -1, 900, 0}},
			{At: 601 * ms, Token: "e", Want: Want{true, 0, -1, 1000, 0}},
		},
	},
	{
		Name:   "unknown tokens release nothing and take nothing",
		Policy: cc(1, time.Minute),
		Steps: []SlotStep{
			{Release: true, Token: "a", Held: false, TTL: NoKey},
			{Token: "a", Want: Want{true, 0, -1, 60_000, 0}},
			{Release: true, Token: "b", Held: false},
			{Release: true, Token: "!sluice:concurrency", Held: false},
			{Token: "b", Want: Want{false, 0, 60_000, 60_000, 0}},
			{At: 1, Token: "b", Want: Want{false, 0, 60_000, 60_000, 0}},
			{At: 2 * ms, Release: true, Token: "a", Held: true, TTL: NoKey},
			{At: 2 * ms, Token: "b", Want: Want{true, 0, -1, 60_000, 0}},
		},
	},
	{
		Name:   "a held token acquired again is renewed, one slot",
		Policy: cc(2, time.Second),
		Steps: []SlotStep{
			{Token: "a", Want: Want{true, 1, -1, 1000, 0}},
			{At: 400 * ms, Token: "a", Want: Want{true, 1, -1, 1000, 0}},
			{At: 1200 * ms, Token: "b", Want: Want{true, 0, -1, 1000, 0}},
			{At: 1300 * ms, Token: "c", Want: Want{false, 0, 100, 900, 0}},
		},
	},
	{
		Name:   "a lowered limit refuses until enough slots free",
		Policy: cc(3, time.Second),
		Steps: []SlotStep{
			{Token: "a", Want: Want{true, 2, -1, 1000, 0}},
			{At: 10 * ms, Token: "b", Want: Want{true, 1, -1, 1000, 0}},
			{At: 20 * ms, Token: "c", Policy: cc(1, time.Second), Want: Want{false, 0, 980, 990, 0}},
			{At: 30 * ms, Release: true, Token: "a", Held: true},
			{At: 30 * ms, Token: "c", Want: Want{false, 0, 980, 980, 0}},
			{At: 1010 * ms, Token: "c", Want: Want{true, 0, -1, 1000, 0}},
		},
	},
}

// switched is the vector of a key whose policy changes from the rate
// policy rp to a concurrency limit and back (DESIGN's "Keys in Redis",
// rule 3). A state another algorithm wrote holds no slot of the
// concurrency policy: an acquire reads it as none held and replaces it,
// admitting no more than the limit, at once (not after that state's TTL,
// which for a calendar year is most of the year); a release finds no slot
// there and leaves it alone. The rate algorithms read the set of slots as
// spent, as they read any other algorithm's state. rp allows one request
// per hour or window, so a second one is refused while its state lives.
func switched(name string, rp *limit.Policy) SlotVector {
	return SlotVector{
		Name:   "from " + name + " and back",
		Policy: cc(2, time.Second),
		Steps: []SlotStep{
			{Rate: rp, Cost: 1, Want: Want{Allowed: true}},
			{At: 1 * ms, Release: true, Token: "a", Held: false},
			{At: 1 * ms, Rate: rp, Cost: 1, Want: Want{Allowed: false}}, // the release left the rate state alone
			{At: 2 * ms, Token: "a", Want: Want{true, 1, -1, 1000, 0}, TTL: 2000},
			{At: 3 * ms, Token: "b", Want: Want{true, 0, -1, 1000, 0}},
			{At: 4 * ms, Token: "c", Want: Want{false, 0, 998, 999, 0}},
			{At: 5 * ms, Rate: rp, Cost: 1, Want: Want{Allowed: false}}, // the slots read as spent
			{At: 6 * ms, Release: true, Token: "a", Held: true},
			{At: 6 * ms, Release: true, Token: "b", Held: true, TTL: NoKey},
			{At: 7 * ms, Rate: rp, Cost: 1, Want: Want{Allowed: true}}, // the set gone, a fresh key
		},
	}
}

// Switched is the table of policy changes to concurrency, from every
// algorithm whose state a key can hold: tags b, g, w (both windows), c
// (calendar), and p (a region's pool, which lives under keys of its own,
// never a user's: covered all the same).
var Switched = []SlotVector{
	switched("token_bucket", tb(1, 1, time.Hour)),
	switched("gcra", gcraP(1, 1, time.Hour)),
	switched("sliding_window", sw(1, time.Hour)),
	switched("fixed_window", fw(1, time.Hour)),
	switched("calendar day", cal(1, limit.CalendarDay, time.UTC)),
	switched("calendar year", cal(1, limit.CalendarYear, time.UTC)),
	{
		Name:   "from a pool",
		Policy: cc(2, time.Second),
		Steps: []SlotStep{
			{Rate: pl(5, 1, time.Hour), Op: limit.OpReturn, Cost: 1, Want: Want{Allowed: true}}, // a pool of one token
			{At: 1 * ms, Release: true, Token: "a", Held: false},
			{At: 2 * ms, Token: "a", Want: Want{true, 1, -1, 1000, 0}, TTL: 2000},
			{At: 3 * ms, Token: "b", Want: Want{true, 0, -1, 1000, 0}},
			{At: 4 * ms, Token: "c", Want: Want{false, 0, 998, 999, 0}},
			{At: 5 * ms, Rate: pl(5, 1, time.Hour), Cost: 1, Want: Want{Allowed: false}}, // the slots read as no pool: empty
			{At: 6 * ms, Release: true, Token: "a", Held: true},
			{At: 6 * ms, Release: true, Token: "b", Held: true, TTL: NoKey},
		},
	},
}

// RunSlots runs every vector of table against impl, each on its own key.
func RunSlots(t *testing.T, table []SlotVector, keyPrefix string, impl Slots) {
	t.Helper()
	for _, v := range table {
		runSteps(t, keyPrefix, v.Name, v.Policy, v.Steps, func(t *testing.T, key string, p *limit.Policy, i int, s SlotStep) {
			now := T0 + s.At
			if s.Rate != nil {
				got := impl.Decide(t, key, s.Rate, s.Cost, s.Op, now)
				if got.Err != nil || got.Allowed != s.Want.Allowed {
					t.Fatalf("step %d (at +%dµs %s of %d): %+v, want allowed %v", i, s.At, s.Rate.Algorithm, s.Cost, got, s.Want.Allowed)
				}
			} else if s.Release {
				if got := impl.Release(t, key, p, s.Token, now); got != s.Held {
					t.Fatalf("step %d (at +%dµs release %q): held %v, want %v", i, s.At, s.Token, got, s.Held)
				}
			} else {
				checkAcquire(t, i, s, p, impl.Acquire(t, key, p, s.Token, ttlOf(s, p), now))
			}
			checkSlotTTL(t, i, s, impl.TTL, key, now)
		})
	}
}

func ttlOf(s SlotStep, p *limit.Policy) int64 {
	if s.TTLMs > 0 {
		return s.TTLMs
	}
	return p.Period.Milliseconds()
}

func checkAcquire(t *testing.T, i int, s SlotStep, p *limit.Policy, got limit.Result) {
	t.Helper()
	if got.Err != nil {
		t.Fatalf("step %d: %v", i, got.Err)
	}
	w := s.Want
	if got.Allowed != w.Allowed || got.Limit != p.Limit || got.Remaining != w.Remaining || got.RetryAfterMs != w.RetryAfter || got.ResetAfterMs != w.ResetAfter {
		t.Fatalf("step %d (at +%dµs acquire %q): got allowed=%v limit=%d free=%d retry=%d reset=%d, want allowed=%v limit=%d free=%d retry=%d reset=%d",
			i, s.At, s.Token, got.Allowed, got.Limit, got.Remaining, got.RetryAfterMs, got.ResetAfterMs,
			w.Allowed, p.Limit, w.Remaining, w.RetryAfter, w.ResetAfter)
	}
}

func checkSlotTTL(t *testing.T, i int, s SlotStep, ttl TTL, key string, now int64) {
	t.Helper()
	if s.TTL == 0 || ttl == nil {
		return
	}
	left := ttl(t, key, now)
	if s.TTL == NoKey && left != NoKey || s.TTL != NoKey && (left > s.TTL || left <= s.TTL-TTLSlack) {
		t.Fatalf("step %d (at +%dµs): TTL %d ms, want %d", i, s.At, left, s.TTL)
	}
}
