package limit

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Concurrency is the algorithm of a concurrency limit (RL.ACQUIRE,
// RL.RELEASE): at most Limit slots held at once, each freeing itself after
// its TTL (Period by default). It is not in Algorithms, which lists what
// RL.TAKE decides: the rate commands refuse a concurrency policy, and the
// slot commands refuse every other.
const Concurrency Algorithm = "concurrency"

// IsConcurrency reports whether a is Concurrency.
func (a Algorithm) IsConcurrency() bool { return a == Concurrency }

// The bounds of a concurrency policy and of RL.ACQUIRE's ttl_ms: a slot is
// held at most MaxSlotTTL (a holder that needs longer renews by acquiring
// again), and a key holds at most MaxSlots slots (each is a member of a
// sorted set in Redis, about 100 bytes).
const (
	MaxSlotTTL = 24 * time.Hour
	MaxSlots   = 1_000_000
)

// MaxTokenBytes bounds the token RL.RELEASE accepts; sluice's own tokens
// are TokenBytes×2 hex digits.
const (
	TokenBytes    = 16
	MaxTokenBytes = 64
)

// SlotParams are a concurrency policy's parameters: Limit slots, held
// TTLMs ms each unless the acquire names its own TTL, of at most MaxTTLMs.
type SlotParams struct {
	Limit    int64 // slots, 1..MaxSlots
	TTLMs    int64 // ms, 1..MaxSlotTTL
	MaxTTLMs int64 // ms, TTLMs..MaxSlotTTL: the policy's max_ttl, else MaxSlotTTL
}

// Slots returns p's slot parameters, or why p cannot be one.
func (p *Policy) Slots() (SlotParams, error) {
	if p.Limit < 1 || p.Limit > MaxSlots {
		return SlotParams{}, fmt.Errorf("limit must be from 1 to %d slots", MaxSlots)
	}
	if p.Period < time.Millisecond || p.Period%time.Millisecond != 0 || p.Period > MaxSlotTTL {
		return SlotParams{}, fmt.Errorf("period (a slot's TTL) must be a whole number of milliseconds from 1ms to %s", MaxSlotTTL)
	}
	sp := SlotParams{Limit: p.Limit, TTLMs: p.Period.Milliseconds(), MaxTTLMs: MaxSlotTTL.Milliseconds()}
	if p.MaxTTL != 0 {
		if p.MaxTTL < p.Period || p.MaxTTL%time.Millisecond != 0 || p.MaxTTL > MaxSlotTTL {
			return SlotParams{}, fmt.Errorf("max_ttl must be a whole number of milliseconds from the period (%s) to %s", p.Period, MaxSlotTTL)
		}
		sp.MaxTTLMs = p.MaxTTL.Milliseconds()
	}
	return sp, nil
}

// TTL returns the TTL in ms of an acquire that names ttlMs (0: none, the
// policy's period), or an *SlotTTLError when it is above the policy's
// MaxTTLMs. name names the policy in the error.
func (sp SlotParams) TTL(name string, ttlMs int64) (int64, error) {
	switch {
	case ttlMs <= 0:
		return sp.TTLMs, nil
	case ttlMs > sp.MaxTTLMs:
		return 0, &SlotTTLError{Policy: name, TTLMs: ttlMs, MaxTTLMs: sp.MaxTTLMs}
	}
	return ttlMs, nil
}

// ErrSlotTTL marks an acquire whose ttl_ms is above what its policy
// allows (max_ttl, else MaxSlotTTL): a bad argument, holding nothing.
var ErrSlotTTL = errors.New("ttl_ms is above the policy's max_ttl")

// SlotTTLError is ErrSlotTTL for one acquire. Its text is the error
// reply's, after "ERR ".
type SlotTTLError struct {
	Policy   string
	TTLMs    int64
	MaxTTLMs int64
}

func (e *SlotTTLError) Error() string {
	return fmt.Sprintf("ttl_ms %d is above max_ttl %s (%d ms) of concurrency policy '%s'",
		e.TTLMs, time.Duration(e.MaxTTLMs)*time.Millisecond, e.MaxTTLMs, e.Policy)
}

// Is reports ErrSlotTTL as a match.
func (e *SlotTTLError) Is(target error) bool { return target == ErrSlotTTL }

// Share returns the slot parameters of the `local` fallback: LocalShare of
// Limit, rounded down but never below 1 (a concurrency limit of one
// instance alone is at least one slot, as every Share).
func (sp SlotParams) Share(p *Policy) SlotParams {
	sp.Limit = p.Share().Limit
	return sp
}

// SlotStore is implemented by stores that hold concurrency slots: the
// Redis store, the in-process store.
type SlotStore interface {
	// Acquire takes one of p's slots for ttlMs under token (unguessable,
	// made by the caller), if one is free. The Result's Remaining is the
	// free slots after it, RetryAfterMs the time until the earliest held
	// slot frees (-1 when allowed), ResetAfterMs until every slot held now
	// frees.
	Acquire(ctx context.Context, key string, p *Policy, token string, ttlMs int64) Result
	// Release frees the slot token holds under key; it reports whether
	// the slot was held (false: unknown or expired).
	Release(ctx context.Context, key string, p *Policy, token string) (bool, error)
}

// ErrWrongAlgorithm marks a command that does not apply to the
// algorithm of the key's policy: RL.TAKE on a concurrency policy,
// RL.ACQUIRE on a rate policy.
var ErrWrongAlgorithm = errors.New("command does not apply to the policy's algorithm")

// AlgorithmError is ErrWrongAlgorithm for one command and policy. Its text
// is the error reply's, after "ERR ".
type AlgorithmError struct {
	Command   string // lower case: rl.take, rl.acquire …
	Policy    string
	Algorithm Algorithm // the policy's
}

func (e *AlgorithmError) Error() string {
	alg, use := e.Algorithm, "RL.ACQUIRE and RL.RELEASE"
	if alg == "" {
		alg = TokenBucket
	}
	if !alg.IsConcurrency() {
		use = "RL.TAKE"
	}
	return e.Command + " does not apply to " + string(alg) + " policy '" + e.Policy + "': use " + use
}

// Is reports ErrWrongAlgorithm as a match.
func (e *AlgorithmError) Is(target error) bool { return target == ErrWrongAlgorithm }
