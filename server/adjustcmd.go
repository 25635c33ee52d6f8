package server

import (
	"github.com/sluice-rl/sluice/internal/edge"
	"github.com/sluice-rl/sluice/limit"
)

// adjustCommand is RL.ADJUST.
//
//	RL.ADJUST key delta [receipt]
//
// corrects what the key's bucket was charged once the real cost is known
// (an LLM's tokens after its response): delta > 0 spends delta more without
// a check, and may leave a bucket in debt (remaining 0, takes refused
// until refill repays it); it needs no receipt (one given is ignored and
// stays good). delta < 0 gives -delta back, never above the limit, and
// only with the receipt of a take on this key (RL.TAKE key cost RECEIPT):
// at most that take's cost, once, to the state the take came from (a
// window that has closed gets nothing). A missing, forged, used, expired
// or foreign receipt is an error and changes nothing (limit.ErrReceipt,
// docs/receipts.md). delta 0 changes nothing and reports the state. The
// reply is RL.TAKE's six fields:
//
//  1. allowed: integer, 1 when the adjust was recorded (0 only when the
//     store could not answer: from fallback-closed or overload-closed, and
//     for a give-back from every fallback, and nothing was recorded)
//  2. limit: integer
//  3. remaining: integer, whole tokens left after it, 0 in debt
//  4. retry_after_ms: integer, -1
//  5. reset_after_ms: integer, ms until the bucket is full again, the
//     debt repaid (a window: until it ends)
//  6. decided_by: bulk string, as RL.TAKE's
//
// It goes in the pipeline's one batch like RL.TAKE, so RL.TAKE k, RL.ADJUST
// k, RL.TAKE k keep their order on k.
func adjustCommand() *command {
	return &command{
		name: "rl.adjust", minArgs: 3, maxArgs: 4,
		batch: adjustRequest,
		doc: cmdDoc{
			summary: "Corrects what was spent: delta > 0 spends more without a check (a bucket may go into debt), delta < 0 gives back at most the cost of the take whose receipt it names, once, never above the limit. Returns [allowed, limit, remaining, retry_after_ms, reset_after_ms, decided_by].",
			group:   "rate-limiting", complexity: "O(1)",
			args:  []docArg{{name: "key", typ: "key"}, {name: "delta", typ: "integer"}, {name: "receipt", typ: "string", optional: true}},
			flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, keyStep: 1,
		},
	}
}

// adjustRequest is the batcher of RL.ADJUST.
func adjustRequest(c *connState, args [][]byte) (limit.Request, error) {
	if err := c.srv.checkKey(args[1]); err != nil {
		return limit.Request{}, err
	}
	delta, ok := edge.ParseDelta(args[2])
	if !ok {
		return limit.Request{}, edge.ErrDelta
	}
	r := limit.Request{Key: string(args[1]), Cost: delta, Op: limit.OpAdjust}
	if len(args) == 4 {
		r.Receipt, r.User = string(args[3]), c.userName() // a receipt is its user's (limit.BindReceipt)
	}
	return r, nil
}
