package server

import (
	"errors"

	"github.com/sluice-rl/sluice/internal/edge"
	"github.com/sluice-rl/sluice/limit"
)

// MaxMTakeKeys bounds the rules of one RL.MTAKE.
const MaxMTakeKeys = 64

// multiCommands are RL.MTAKE and CL.THROTTLE.
//
// RL.MTAKE key cost [key cost ...] takes from every key's bucket, or from
// none: the reply is [allowed, [six-field reply per key, in order]].
//
// CL.THROTTLE key max_burst count period [quantity] is redis-cell's
// command: GCRA with a burst of max_burst+1 and count per period seconds.
// The reply is five integers: limited (0 allowed, 1 limited), limit,
// remaining, retry_after seconds (-1 when allowed), reset_after seconds;
// seconds are rounded up.
func multiCommands() []*command {
	return []*command{
		{
			name: "rl.mtake", minArgs: 3, maxArgs: 1 + 2*MaxMTakeKeys,
			flags: flagBarrier,
			run:   cmdMTake,
			doc: cmdDoc{
				summary:    "Takes cost from every key's bucket, or from none. Returns [allowed, [[allowed, limit, remaining, retry_after_ms, reset_after_ms, decided_by] per key]].",
				group:      "rate-limiting",
				complexity: "O(N) where N is the number of keys",
				args: []docArg{{name: "data", typ: "block", multiple: true, sub: []docArg{
					{name: "key", typ: "key"}, {name: "cost", typ: "integer"}}}},
				flags:    []string{"write"},
				firstKey: 1, lastKey: -1, keyStep: 2,
			},
		},
		{
			name: "cl.throttle", minArgs: 5, maxArgs: 6,
			flags: flagCellReply,
			batch: throttleRequest,
			doc: cmdDoc{
				summary:    "redis-cell's CL.THROTTLE across the cluster (GCRA). Returns [limited, limit, remaining, retry_after_s, reset_after_s].",
				group:      "rate-limiting",
				complexity: "O(1)",
				args: []docArg{{name: "key", typ: "key"}, {name: "max_burst", typ: "integer"},
					{name: "count", typ: "integer"}, {name: "period", typ: "integer"},
					{name: "quantity", typ: "integer", optional: true}},
				flags:    []string{"write", "fast"},
				firstKey: 1, lastKey: 1, keyStep: 1,
			},
		},
	}
}

const (
	errMTakeArity  respError = "ERR wrong number of arguments for 'rl.mtake' command"
	errMulti       respError = "ERR RL.MTAKE and CL.THROTTLE are not supported by this server's decider"
	errMaxBurst    respError = "ERR max_burst must be a non-negative integer"
	errCount       respError = "ERR count must be a positive integer"
	errPeriod      respError = "ERR period must be a positive integer (seconds)"
	errQuantity    respError = "ERR quantity must be a non-negative integer"
	errCellTooFine respError = "ERR invalid CL.THROTTLE arguments: "
)

func cmdMTake(c *connState, args [][]byte) (any, error) {
	md, ok := c.srv.cfg.Decider.(MultiDecider)
	if !ok {
		return nil, errMulti
	}
	if len(args)%2 != 1 {
		return nil, errMTakeArity
	}
	reqs := make([]limit.Request, 0, len(args)/2)
	for i := 1; i < len(args); i += 2 {
		if err := c.srv.checkKey(args[i]); err != nil {
			return nil, err
		}
		cost, ok := edge.ParseCost(args[i+1])
		if !ok {
			return nil, edge.ErrCost
		}
		reqs = append(reqs, limit.Request{Key: string(args[i]), Cost: cost, Op: limit.OpTake})
	}
	out := make([]limit.Result, len(reqs))
	// A missing policy comes back as "no policy matches key 'k'".
	allowed, err := md.MTake(c.srv.ctx, reqs, out)
	if errors.Is(err, limit.ErrNoPolicy) {
		return nil, respError("ERR " + oneLine(err.Error())) // names the key
	}
	if err != nil {
		return nil, err
	}
	rules := make([]any, len(out))
	for i := range out {
		rules[i] = &out[i]
	}
	return []any{allowed, rules}, nil
}

// throttleRequest is the batcher of CL.THROTTLE: the request carries its
// own policy, made from the arguments.
func throttleRequest(c *connState, args [][]byte) (limit.Request, error) {
	md, ok := c.srv.cfg.Decider.(MultiDecider)
	if !ok {
		return limit.Request{}, errMulti
	}
	if err := c.srv.checkKey(args[1]); err != nil {
		return limit.Request{}, err
	}
	maxBurst, ok := parseCount(args[2])
	if !ok {
		return limit.Request{}, errMaxBurst
	}
	count, ok := edge.ParseCost(args[3])
	if !ok {
		return limit.Request{}, errCount
	}
	period, ok := edge.ParseCost(args[4])
	if !ok {
		return limit.Request{}, errPeriod
	}
	quantity := int64(1)
	if len(args) == 6 {
		if quantity, ok = parseCount(args[5]); !ok {
			return limit.Request{}, errQuantity
		}
	}
	p, err := md.ThrottlePolicy(string(args[1]), maxBurst, count, period)
	if err != nil {
		return limit.Request{}, errCellTooFine + respError(err.Error())
	}
	return limit.Request{Key: string(args[1]), Cost: quantity, Op: limit.OpTake, Policy: p}, nil
}

// parseCount accepts 0 or a positive integer written as edge.ParseCost reads it.
func parseCount(b []byte) (int64, bool) {
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	return edge.ParseCost(b)
}

// cellReply is a decision in CL.THROTTLE's reply: limited, limit,
// remaining, retry_after and reset_after in seconds, rounded up.
func cellReply(r *limit.Result) []any {
	limited, retry := int64(1), int64(-1)
	if r.Allowed {
		limited = 0
	} else if r.RetryAfterMs >= 0 {
		retry = ceilSeconds(r.RetryAfterMs)
	}
	return []any{limited, r.Limit, r.Remaining, retry, ceilSeconds(r.ResetAfterMs)}
}

func ceilSeconds(ms int64) int64 {
	if ms <= 0 {
		return 0
	}
	return (ms + 999) / 1000
}
