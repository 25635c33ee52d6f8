package limit

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// A receipt names one take that a later give-back (an RL.ADJUST of a
// negative delta) undoes: the store writes it with the take, in the same
// atomic step, and consumes it with the give-back, in the same step as the
// credit, so a receipt exists only for a spend that happened and is good
// once, on every sluice instance, with no shared secret
// (docs/receipts.md). What the store keeps for it is a ReceiptRecord.

// ReceiptBytes is the random bytes of a receipt id: 128 bits from
// crypto/rand, written as 2×ReceiptBytes lower-case hex digits.
const ReceiptBytes = 16

// NewReceipt returns a new receipt id.
func NewReceipt() string {
	var b [ReceiptBytes]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
	return hex.EncodeToString(b[:])
}

// BindReceipt returns the id a store records receipt under for user: the
// first ReceiptBytes of SHA-256(user, 0, receipt), in hex. The client sees
// receipt; the store sees only the bound id. So a receipt given back by
// another user (one that shares the key's permissions and somehow learnt
// it) names no take, and is refused as unknown: no client gives back what
// another spent (DESIGN, rule 4). An id read out of Redis names none
// either: finding the receipt behind it is a SHA-256 preimage.
func BindReceipt(user, receipt string) string {
	h := sha256.New()
	h.Write([]byte(user))
	h.Write([]byte{0})
	h.Write([]byte(receipt))
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:ReceiptBytes])
}

// ValidReceipt reports whether s has the shape of a receipt id (what
// NewReceipt returns); anything else is refused before the store is asked.
func ValidReceipt[T ~string | ~[]byte](s T) bool {
	if len(s) != 2*ReceiptBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ErrReceipt marks a give-back refused for its receipt; errors.Is matches
// every *ReceiptError. Such a give-back changes nothing.
var ErrReceipt = errors.New("receipt refused")

// ReceiptError is one reason a give-back is refused. Its text is the error
// reply's, after "ERR ".
type ReceiptError struct{ msg string }

func (e *ReceiptError) Error() string { return e.msg }

// Is reports ErrReceipt as a match.
func (e *ReceiptError) Is(target error) bool { return target == ErrReceipt }

// The reasons a give-back is refused.
var (
	// ErrReceiptMissing: a negative delta without a receipt.
	ErrReceiptMissing = &ReceiptError{"a negative delta gives back a take: name its receipt (RL.TAKE key cost RECEIPT, then RL.ADJUST key delta receipt)"}
	// ErrReceiptInvalid: not a receipt of a take on this key that is still
	// in force: forged, another key's, used already, or expired (the take's
	// window closed, its bucket would have refilled).
	ErrReceiptInvalid = &ReceiptError{"invalid, expired or already used receipt"}
	// ErrReceiptPolicy: the take was made under another policy than the
	// key's now.
	ErrReceiptPolicy = &ReceiptError{"receipt was taken under another policy"}
	// ErrReceiptCost: the give-back is more than the take's cost.
	ErrReceiptCost = &ReceiptError{"delta exceeds the cost of the receipt's take"}
)

// ReceiptRecord is what a store keeps for a receipt: the take's Cost, the
// Window its tokens were taken in (Result.Window: 0 for a bucket), and the
// Owner of the policy that took it (Policy.Owner).
type ReceiptRecord struct {
	Cost   int64
	Window int64
	Owner  string
}

// Receipted reports whether p's takes can carry a receipt: a regional
// policy of RL.TAKE's algorithms (not a region's pool, floor or a split
// sub-bucket: only the user's own state is given back to).
func (p *Policy) Receipted() bool {
	return p.Adjustable() == nil && p.Space == SpaceUser && !p.Algorithm.IsConcurrency()
}

// Owner is p's identity as a receipt records it: a digest of what decides
// a state's meaning (name, algorithm, limit, rate, period, calendar and
// zone). A policy reloaded unchanged keeps it; any change of those makes
// the receipts taken before it foreign (ErrReceiptPolicy).
func (p *Policy) Owner() string {
	zone := ""
	if p.Zone != nil {
		zone = p.Zone.String()
	}
	alg := p.Algorithm
	if alg == "" {
		alg = TokenBucket
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%q %s %d %d %d %s %q", p.Name, alg, p.Limit, p.Rate, p.Period, p.Calendar, zone))
	return hex.EncodeToString(sum[:8])
}

// ReceiptLifeMs is how long, in ms from now (µs on the store's clock), the
// receipt of a take under p decided in window (Result.Window) is worth
// keeping: after it a give-back could no longer undo the take. A bucket:
// the time to refill from empty to full (limit × period / rate), after
// which its tokens would be back anyway. A fixed window: until the window
// ends; a sliding window: until the next one ends (the window's count
// weighs on it); a calendar window (window is its end): until it ends. At
// least 1 ms. lua/receipt.lua computes the same.
func ReceiptLifeMs(p *Policy, window, now int64) int64 {
	var until int64 // µs
	switch {
	case p.Algorithm.IsBucket():
		b, err := p.Bucket()
		if err != nil {
			return 1
		}
		return max(1, ceilDiv(b.Capacity, b.Refill*1000))
	case p.Calendar != "":
		until = window
	default:
		w, err := p.Window()
		if err != nil {
			return 1
		}
		until = window + w.Length()
		if p.Algorithm == SlidingWindow {
			until += w.Length()
		}
	}
	return max(1, ceilDiv(until-now, int64(time.Millisecond/time.Microsecond)))
}

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}
