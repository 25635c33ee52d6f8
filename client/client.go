package client

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Doer is what Client needs of go-redis: *redis.Client, *redis.Conn and a
// redis.Pipeliner all have it.
type Doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// Client sends sluice's commands through a go-redis client it does not
// own: closing that client is the caller's business. The zero value is
// not usable; call New. Safe for concurrent use when the Doer is.
type Client struct {
	rdb Doer
}

// New returns a Client over rdb, typically
// redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"}).
func New(rdb Doer) *Client { return &Client{rdb: rdb} }

// Decision is one reply of RL.TAKE, RL.PEEK, RL.ADJUST or one rule of
// RL.MTAKE, in Go units.
type Decision struct {
	// Allowed reports whether the request was admitted.
	Allowed bool
	// Limit is the policy's burst capacity (or requests per window, or
	// slots of a concurrency policy).
	Limit int64
	// Remaining is the whole tokens (or free slots) left after the decision.
	Remaining int64
	// RetryAfter is how long until the same request could be admitted:
	// 0 when it was, and 0 with Never set when it can never be (its cost
	// is over the limit).
	RetryAfter time.Duration
	// Never is set when the request can never be admitted: its cost is
	// over the policy's limit, so no wait helps.
	Never bool
	// ResetAfter is how long until the bucket is full again (a window: until
	// it ends; a concurrency policy: until every slot held now frees).
	ResetAfter time.Duration
	// DecidedBy names the path that decided: "store", "lease", "split",
	// "embedded", "deny-cache", "fallback-local" and the others of the
	// README's failure-policy table.
	DecidedBy string
	// Receipt names the take for a later give-back (Adjust with a
	// negative delta): set by TakeWithReceipt when the store admitted the
	// take and recorded it; empty otherwise (refused, or answered without
	// the store, which leaves nothing to give back).
	Receipt string
}

// Slot is the reply of RL.ACQUIRE: the Decision and, when admitted, the
// token that RL.RELEASE frees the slot with.
type Slot struct {
	Decision
	// Token names the slot held; empty when the acquire was refused.
	Token string
}

// Rule is one key and cost of an MTake.
type Rule struct {
	Key  string
	Cost int64
}

// Take spends cost tokens of key (RL.TAKE key cost). A refusal is a
// Decision with Allowed false, not an error.
func (c *Client) Take(ctx context.Context, key string, cost int64) (Decision, error) {
	return c.decision(ctx, "RL.TAKE", key, cost)
}

// Peek reports what Take would decide, spending nothing (RL.PEEK key cost).
func (c *Client) Peek(ctx context.Context, key string, cost int64) (Decision, error) {
	return c.decision(ctx, "RL.PEEK", key, cost)
}

// TakeWithReceipt is Take that asks for a receipt (RL.TAKE key cost
// RECEIPT): when admitted, Decision.Receipt names the take, so that Adjust
// can give back what it did not use.
func (c *Client) TakeWithReceipt(ctx context.Context, key string, cost int64) (Decision, error) {
	v, err := c.do(ctx, "RL.TAKE", key, cost, "RECEIPT")
	if err != nil {
		return Decision{}, err
	}
	if len(v) != 7 {
		return Decision{}, shapeError("RL.TAKE", v, "7 elements")
	}
	d, err := parseDecision(v[:6])
	if err != nil {
		return Decision{}, fmt.Errorf("sluice: RL.TAKE: %w", err)
	}
	receipt, ok := v[6].(string)
	if !ok {
		return Decision{}, shapeError("RL.TAKE", v, "a bulk string receipt as element 7")
	}
	d.Receipt = receipt
	return d, nil
}

// Adjust corrects what key has spent once the real cost is known
// (RL.ADJUST key delta [receipt]): delta > 0 spends more without a check
// and may leave the key in debt (receipt may be empty); delta < 0 gives
// back, never above the limit, at most the cost of the take that receipt
// names (a Decision.Receipt of TakeWithReceipt on key), once. A missing,
// used, expired or foreign receipt is an *Error, and nothing is given
// back.
func (c *Client) Adjust(ctx context.Context, key string, delta int64, receipt string) (Decision, error) {
	if receipt == "" {
		return c.decision(ctx, "RL.ADJUST", key, delta)
	}
	return c.decision(ctx, "RL.ADJUST", key, delta, receipt)
}

// Reset forgets key's state (RL.RESET key): true if there was any.
func (c *Client) Reset(ctx context.Context, key string) (bool, error) {
	return c.flag(ctx, "RL.RESET", key)
}

// Release frees the slot that token names (RL.RELEASE key token): true if
// it was held, false if the token is unknown or the slot expired already.
func (c *Client) Release(ctx context.Context, key, token string) (bool, error) {
	return c.flag(ctx, "RL.RELEASE", key, token)
}

// Acquire takes one slot of key's concurrency policy (RL.ACQUIRE key
// [ttl_ms]). The slot frees itself after ttl; 0 means the policy's period.
// A ttl under a millisecond is sent as 1 ms.
func (c *Client) Acquire(ctx context.Context, key string, ttl time.Duration) (Slot, error) {
	args := []any{"RL.ACQUIRE", key}
	if ttl > 0 {
		args = append(args, max(1, ttl.Milliseconds()))
	}
	v, err := c.do(ctx, args...)
	if err != nil {
		return Slot{}, err
	}
	if len(v) != 7 {
		return Slot{}, shapeError("RL.ACQUIRE", v, "7 elements")
	}
	d, err := parseDecision(v[:6])
	if err != nil {
		return Slot{}, fmt.Errorf("sluice: RL.ACQUIRE: %w", err)
	}
	token, ok := v[6].(string)
	if !ok {
		return Slot{}, shapeError("RL.ACQUIRE", v, "a bulk string token as element 7")
	}
	return Slot{Decision: d, Token: token}, nil
}

// MTake spends every rule's cost or none (RL.MTAKE key cost [key cost …]):
// allowed is true when all were admitted, and the decisions are the rules'
// in order. At least one rule is needed.
func (c *Client) MTake(ctx context.Context, rules ...Rule) (allowed bool, decisions []Decision, err error) {
	if len(rules) == 0 {
		return false, nil, fmt.Errorf("%w: MTake needs at least one rule", ErrInvalid)
	}
	args := make([]any, 1, 1+2*len(rules))
	args[0] = "RL.MTAKE"
	for _, r := range rules {
		args = append(args, r.Key, r.Cost)
	}
	v, err := c.do(ctx, args...)
	if err != nil {
		return false, nil, err
	}
	if len(v) != 2 {
		return false, nil, shapeError("RL.MTAKE", v, "2 elements")
	}
	all, isInt := v[0].(int64)
	each, isArr := v[1].([]any)
	if !isInt || !isArr || len(each) != len(rules) {
		return false, nil, shapeError("RL.MTAKE", v, fmt.Sprintf("[integer, %d replies]", len(rules)))
	}
	decisions = make([]Decision, len(rules))
	for i, r := range each {
		fields, _ := r.([]any)
		if decisions[i], err = parseDecision(fields); err != nil {
			return false, nil, fmt.Errorf("sluice: RL.MTAKE rule %d: %w", i+1, err)
		}
	}
	return all == 1, decisions, nil
}

// decision sends a command whose reply is the six fields.
func (c *Client) decision(ctx context.Context, args ...any) (Decision, error) {
	v, err := c.do(ctx, args...)
	if err != nil {
		return Decision{}, err
	}
	d, err := parseDecision(v)
	if err != nil {
		return Decision{}, fmt.Errorf("sluice: %s: %w", args[0], err)
	}
	return d, nil
}

// send sends a command: an error reply comes back as *Error, any other
// failure as go-redis gave it.
func (c *Client) send(ctx context.Context, args ...any) (*redis.Cmd, error) {
	cmd := c.rdb.Do(ctx, args...)
	if err := cmd.Err(); err != nil {
		return nil, replyError(err)
	}
	return cmd, nil
}

// flag sends a command whose reply is :1 or :0.
func (c *Client) flag(ctx context.Context, args ...any) (bool, error) {
	cmd, err := c.send(ctx, args...)
	if err != nil {
		return false, err
	}
	n, err := cmd.Int64()
	if err != nil {
		return false, fmt.Errorf("sluice: %s: unexpected reply: %w", args[0], err)
	}
	return n == 1, nil
}

// do sends a command whose reply is an array.
func (c *Client) do(ctx context.Context, args ...any) ([]any, error) {
	cmd, err := c.send(ctx, args...)
	if err != nil {
		return nil, err
	}
	v, err := cmd.Slice()
	if err != nil {
		return nil, fmt.Errorf("sluice: %s: unexpected reply: %w", args[0], err)
	}
	if len(v) == 0 {
		return nil, shapeError(args[0].(string), v, "a non-empty array")
	}
	return v, nil
}

// parseDecision reads the six fields: allowed, limit, remaining,
// retry_after_ms, reset_after_ms, decided_by.
func parseDecision(v []any) (Decision, error) {
	if len(v) != 6 {
		return Decision{}, fmt.Errorf("reply has %d elements, want 6", len(v))
	}
	var n [5]int64
	for i := range n {
		x, ok := v[i].(int64)
		if !ok {
			return Decision{}, fmt.Errorf("element %d is %T, want an integer", i+1, v[i])
		}
		n[i] = x
	}
	by, ok := v[5].(string)
	if !ok {
		return Decision{}, fmt.Errorf("element 6 is %T, want a bulk string", v[5])
	}
	d := Decision{Allowed: n[0] == 1, Limit: n[1], Remaining: n[2], ResetAfter: ms(n[4]), DecidedBy: by}
	if n[3] >= 0 {
		d.RetryAfter = ms(n[3])
	} else if !d.Allowed {
		d.Never = true
	}
	return d, nil
}

func ms(n int64) time.Duration { return time.Duration(max(0, n)) * time.Millisecond }

func shapeError(cmd string, v []any, want string) error {
	return fmt.Errorf("sluice: %s: unexpected reply %v, want %s", cmd, v, want)
}
