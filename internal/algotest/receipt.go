package algotest

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// ReceiptStep is one take with a receipt or one give-back at T0 + At µs.
type ReceiptStep struct {
	At   int64
	Cost int64 // a take's cost, or with Give the give-back's delta (< 0)
	Give bool
	// Receipt labels a receipt within the vector: a take records under it
	// (a new id), a give-back names the id of the take that recorded it.
	// Forged names a well-formed id that no take recorded.
	Receipt string
	Policy  *limit.Policy // replaces the vector's from this step on
	Want    Want          // when Err is nil
	Err     error         // the give-back's refusal (errors.Is)
	// TTL, after a take that recorded, is the receipt's TTL in ms,
	// checked by the runners that can read it.
	TTL int64
}

// Forged is ReceiptStep.Receipt for an id no take recorded.
const Forged = "forged"

// ReceiptVector is a named sequence of receipt steps on one fresh key.
type ReceiptVector struct {
	Name   string
	Policy *limit.Policy
	Steps  []ReceiptStep
}

// Receipter takes cost on key under p with receipt id receipt, or gives
// -cost back with it (give), at now.
type Receipter func(t *testing.T, key string, p *limit.Policy, cost int64, give bool, receipt string, now int64) limit.Result

// ReceiptTTL is the TTL in ms of key's receipt id at now (NoKey: none).
type ReceiptTTL func(t *testing.T, key, receipt string, now int64) int64

// RunReceipts runs every vector of table on run (and ttl, when not nil):
// each reply's fields, each refusal's error, and each take's receipt —
// its id when admitted, "" when refused.
func RunReceipts(t *testing.T, table []ReceiptVector, keyPrefix string, run Receipter, ttl ReceiptTTL) {
	t.Helper()
	for _, v := range table {
		t.Run(v.Name, func(t *testing.T) {
			key := keyPrefix + v.Name
			p := v.Policy
			ids := map[string]string{Forged: limit.NewReceipt()}
			for i, s := range v.Steps {
				if s.Policy != nil {
					p = s.Policy
				}
				id := ids[s.Receipt]
				if !s.Give && s.Receipt != "" {
					id = limit.NewReceipt()
					ids[s.Receipt] = id
				}
				got := run(t, key, p, s.Cost, s.Give, id, T0+s.At)
				if s.Err != nil || got.Err != nil {
					if !errors.Is(got.Err, s.Err) || s.Err == nil {
						t.Fatalf("step %d (at +%dµs cost %d receipt %s): error %v, want %v", i, s.At, s.Cost, s.Receipt, got.Err, s.Err)
					}
					continue
				}
				w := s.Want
				if got.Allowed != w.Allowed || got.Remaining != w.Remaining || got.RetryAfterMs != w.RetryAfter || got.ResetAfterMs != w.ResetAfter || got.Limit != p.Limit {
					t.Fatalf("step %d (at +%dµs cost %d receipt %s): got allowed=%v limit=%d remaining=%d retry=%d reset=%d, want allowed=%v limit=%d remaining=%d retry=%d reset=%d",
						i, s.At, s.Cost, s.Receipt, got.Allowed, got.Limit, got.Remaining, got.RetryAfterMs, got.ResetAfterMs,
						w.Allowed, p.Limit, w.Remaining, w.RetryAfter, w.ResetAfter)
				}
				if !s.Give {
					if want := map[bool]string{true: id, false: ""}[got.Allowed && s.Cost > 0]; got.Receipt != want {
						t.Fatalf("step %d: receipt %q, want %q", i, got.Receipt, want)
					}
				}
				if s.TTL == 0 || ttl == nil {
					continue
				}
				if left := ttl(t, key, id, T0+s.At); left > s.TTL || left < s.TTL-TTLSlack {
					t.Fatalf("step %d: receipt TTL %d ms, want %d", i, left, s.TTL)
				}
			}
		})
	}
}

// Receipts is the receipt vectors, for both bucket algorithms (their
// replies agree to the unit: a token is 100 ms of refill at 10 per
// second) and both window algorithms.
var Receipts = append(append(receiptBucket("token_bucket", tb), receiptBucket("gcra", gcraP)...), receiptWindows...)

func receiptBucket(name string, pol func(int64, int64, time.Duration) *limit.Policy) []ReceiptVector {
	p := pol(10, 10, time.Second)
	return []ReceiptVector{
		{
			Name:   name + " a receipt gives back at most its take's cost, once, under its own policy",
			Policy: p,
			Steps: []ReceiptStep{
				{Cost: 4, Receipt: "r1", Want: Want{true, 6, -1, 400, 0}, TTL: 1000},
				{Cost: -5, Give: true, Receipt: "r1", Err: limit.ErrReceiptCost},
				{Cost: -3, Give: true, Receipt: "r1", Want: Want{true, 9, -1, 100, 0}},
				{Cost: -1, Give: true, Receipt: "r1", Err: limit.ErrReceiptInvalid},
				{Cost: -1, Give: true, Receipt: Forged, Err: limit.ErrReceiptInvalid},
				{Cost: 2, Receipt: "r2", Want: Want{true, 7, -1, 300, 0}},
				{Cost: -2, Give: true, Receipt: "r2", Policy: pol(20, 10, time.Second), Err: limit.ErrReceiptPolicy},
				{Cost: -2, Give: true, Receipt: "r2", Policy: p, Want: Want{true, 9, -1, 100, 0}},
				{Cost: 11, Receipt: "r3", Want: Want{false, 9, -1, 100, 0}},
				{Cost: -1, Give: true, Receipt: "r3", Err: limit.ErrReceiptInvalid},
			},
		},
		{
			Name:   name + " a receipt expires once the bucket would have refilled from empty",
			Policy: p,
			Steps: []ReceiptStep{
				{Cost: 10, Receipt: "r1", Want: Want{true, 0, -1, 1000, 0}, TTL: 1000},
				{At: 999 * ms, Cost: -1, Give: true, Receipt: "r1", Want: Want{true, 10, -1, 0, 0}},
				{At: 999 * ms, Cost: 5, Receipt: "r2", Want: Want{true, 5, -1, 500, 0}, TTL: 1000},
				{At: 999 * ms, Cost: 5, Receipt: "r3", Want: Want{true, 0, -1, 1000, 0}, TTL: 1000},
				{At: 1999*ms - 1, Cost: -1, Give: true, Receipt: "r2", Want: Want{true, 10, -1, 0, 0}},
				{At: 1999 * ms, Cost: -1, Give: true, Receipt: "r3", Err: limit.ErrReceiptInvalid},
			},
		},
	}
}

var receiptWindows = []ReceiptVector{
	{
		Name:   "fixed_window a receipt is good until its window ends",
		Policy: fw(10, time.Second),
		Steps: []ReceiptStep{
			{At: 900 * ms, Cost: 10, Receipt: "r1", Want: Want{true, 0, -1, 100, 0}, TTL: 100},
			{At: 950 * ms, Cost: -4, Give: true, Receipt: "r1", Want: Want{true, 4, -1, 50, 0}},
			{At: 990 * ms, Cost: 4, Receipt: "r2", Want: Want{true, 0, -1, 10, 0}, TTL: 10},
			{At: 1000 * ms, Cost: -4, Give: true, Receipt: "r2", Err: limit.ErrReceiptInvalid},
			{At: 1000 * ms, Cost: 10, Receipt: "r3", Want: Want{true, 0, -1, 1000, 0}, TTL: 1000},
			{At: 1000 * ms, Cost: 1, Receipt: "r4", Want: Want{false, 0, 1000, 1000, 0}},
		},
	},
	{
		Name:   "sliding_window a receipt is good until the next window ends, and gives back to its own",
		Policy: sw(10, time.Second),
		Steps: []ReceiptStep{
			{At: 900 * ms, Cost: 10, Receipt: "r1", Want: Want{true, 0, -1, 1100, 0}, TTL: 1100},
			{At: 1500 * ms, Cost: -6, Give: true, Receipt: "r1", Want: Want{true, 8, -1, 500, 0}},
			{At: 1500 * ms, Cost: 8, Receipt: "r2", Want: Want{true, 0, -1, 1500, 0}, TTL: 1500},
			{At: 2999 * ms, Cost: -8, Give: true, Receipt: "r2", Want: Want{true, 10, -1, 0, 0}},
			{At: 2999 * ms, Cost: 1, Receipt: "r3", Want: Want{true, 9, -1, 1001, 0}, TTL: 1001},
			{At: 4000 * ms, Cost: -1, Give: true, Receipt: "r3", Err: limit.ErrReceiptInvalid},
		},
	},
	{
		Name:   "calendar a receipt is good until its day ends (New York, 23 hours on the day daylight saving starts)",
		Policy: cal(3, limit.CalendarDay, newYork),
		Steps: []ReceiptStep{
			{At: at(newYork, "2024-03-10 12:00:00"), Cost: 2, Receipt: "r1", Want: Want{true, 1, -1, 12 * hourMs, 0}, TTL: 12 * hourMs},
			{At: at(newYork, "2024-03-10 23:00:00"), Cost: -1, Give: true, Receipt: "r1", Want: Want{true, 2, -1, hourMs, 0}},
			{At: at(newYork, "2024-03-10 23:59:59"), Cost: 2, Receipt: "r2", Want: Want{true, 0, -1, 1000, 0}, TTL: 1000},
			{At: at(newYork, "2024-03-11 00:00:00"), Cost: -2, Give: true, Receipt: "r2", Err: limit.ErrReceiptInvalid},
			{At: at(newYork, "2024-03-11 00:00:00"), Cost: 3, Receipt: "r3", Want: Want{true, 0, -1, 24 * hourMs, 0}, TTL: 24 * hourMs},
		},
	},
	{
		Name:   "a receipt of another algorithm's take is foreign",
		Policy: fw(10, time.Second),
		Steps: []ReceiptStep{
			{Cost: 3, Receipt: "r1", Want: Want{true, 7, -1, 1000, 0}, TTL: 1000},
			{Cost: -3, Give: true, Receipt: "r1", Policy: tb(10, 10, time.Second), Err: limit.ErrReceiptPolicy},
		},
	},
}
