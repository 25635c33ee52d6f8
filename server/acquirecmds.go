package server

import (
	"context"

	"github.com/tidwall/redcon"

	"github.com/sluice-rl/sluice/internal/edge"
	"github.com/sluice-rl/sluice/limit"
)

// SlotDecider is a Decider that also answers RL.ACQUIRE and RL.RELEASE;
// the limiter implements it. Without it those commands answer an error.
type SlotDecider interface {
	// Acquire takes one of the slots of key's concurrency policy for
	// ttlMs (0: the policy's period) and returns the decision and the
	// token naming the slot ("" when refused).
	Acquire(ctx context.Context, key string, ttlMs int64) (limit.Result, string)
	// Release frees the slot token names; it reports whether it was held.
	Release(ctx context.Context, key, token string) (bool, error)
}

const errNoSlots respError = "ERR RL.ACQUIRE and RL.RELEASE are not supported by this server's decider"

// acquireCommands are the concurrency commands.
//
// RL.ACQUIRE key [ttl_ms] takes one of the `limit` slots of key's
// concurrency policy, held until RL.RELEASE or for ttl_ms (default: the
// policy's period; at most limit.MaxSlotTTL, and the policy's max_ttl,
// which the limiter checks). The reply is an array of
// seven:
//
//  1. allowed: integer, 1 acquired, 0 refused
//  2. limit: integer, the slots of the policy
//  3. remaining: integer, free slots after this decision
//  4. retry_after_ms: integer, -1 when allowed, else until the earliest held slot frees
//  5. reset_after_ms: integer, until every slot held now frees
//  6. decided_by: bulk string, as RL.TAKE's
//  7. token: bulk string naming the slot, empty when refused
//
// RL.RELEASE key token frees the slot and answers :1 if it was held, :0
// if the token is unknown (another key's included) or expired.
//
// Both are barriers: an RL.TAKE pipelined before them is decided first.
func acquireCommands() []*command {
	keyArg := docArg{name: "key", typ: "key"}
	return []*command{
		{
			name: "rl.acquire", minArgs: 2, maxArgs: 3,
			flags: flagBarrier,
			run:   cmdAcquire,
			doc: cmdDoc{
				summary:    "Takes one of the key's concurrency slots for ttl_ms (default: the policy's period). Returns [allowed, limit, remaining, retry_after_ms, reset_after_ms, decided_by, token].",
				group:      "rate-limiting",
				complexity: "O(log N) where N is the number of slots held",
				args:       []docArg{keyArg, {name: "ttl_ms", typ: "integer", optional: true}},
				flags:      []string{"write"},
				firstKey:   1, lastKey: 1, keyStep: 1,
			},
		},
		{
			name: "rl.release", minArgs: 3, maxArgs: 3,
			flags: flagBarrier,
			run:   cmdRelease,
			doc: cmdDoc{
				summary:    "Frees the slot a token of RL.ACQUIRE names. Returns 1 if it was held, else 0.",
				group:      "rate-limiting",
				complexity: "O(log N) where N is the number of slots held",
				args:       []docArg{keyArg, {name: "token", typ: "string"}},
				flags:      []string{"write", "fast"},
				firstKey:   1, lastKey: 1, keyStep: 1,
			},
		},
	}
}

// acquired is RL.ACQUIRE's seven-element reply.
type acquired struct {
	res   limit.Result
	token string
}

func cmdAcquire(c *connState, args [][]byte) (any, error) {
	sd, ok := c.srv.cfg.Decider.(SlotDecider)
	if !ok {
		return nil, errNoSlots
	}
	if err := c.srv.checkKey(args[1]); err != nil {
		return nil, err
	}
	var ttl int64
	if len(args) == 3 {
		var err error
		if ttl, err = edge.ParseTTL(args[2]); err != nil {
			return nil, err
		}
	}
	res, token := sd.Acquire(c.srv.ctx, string(args[1]), ttl)
	if res.Err != nil {
		return nil, &decisionError{key: string(args[1]), err: res.Err}
	}
	return &acquired{res, token}, nil
}

func cmdRelease(c *connState, args [][]byte) (any, error) {
	sd, ok := c.srv.cfg.Decider.(SlotDecider)
	if !ok {
		return nil, errNoSlots
	}
	if err := c.srv.checkKey(args[1]); err != nil {
		return nil, err
	}
	if err := edge.CheckToken(args[2]); err != nil {
		return nil, err
	}
	held, err := sd.Release(c.srv.ctx, string(args[1]), string(args[2]))
	if err != nil {
		return nil, &decisionError{key: string(args[1]), err: err}
	}
	return held, nil
}

// appendAcquired appends RL.ACQUIRE's reply: RL.TAKE's six fields
// (appendResult) and the token.
func appendAcquired(b []byte, a *acquired) []byte {
	b = redcon.AppendArray(b, 7)
	allowed := int64(0)
	if a.res.Allowed {
		allowed = 1
	}
	b = redcon.AppendInt(b, allowed)
	b = redcon.AppendInt(b, a.res.Limit)
	b = redcon.AppendInt(b, a.res.Remaining)
	b = redcon.AppendInt(b, a.res.RetryAfterMs)
	b = redcon.AppendInt(b, a.res.ResetAfterMs)
	b = redcon.AppendBulkString(b, a.res.DecidedBy)
	return redcon.AppendBulkString(b, a.token)
}
