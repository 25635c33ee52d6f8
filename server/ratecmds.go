package server

import (
	"strconv"
	"strings"

	"github.com/tidwall/redcon"

	"github.com/sluice-rl/sluice/internal/edge"
	"github.com/sluice-rl/sluice/limit"
)

// rateCommands are the rate-limiting commands.
//
// RL.TAKE key [cost] takes cost tokens (default 1) from the bucket of the
// key's policy; RL.PEEK key [cost] answers the same without spending. The
// reply is always an array of six:
//
//  1. allowed: integer, 1 admitted, 0 rejected
//  2. limit: integer, the policy's burst capacity
//  3. remaining: integer, whole tokens left after this decision
//  4. retry_after_ms: integer, -1 when allowed or when cost > limit
//  5. reset_after_ms: integer, ms until the bucket is full again
//  6. decided_by: bulk string, store, lease, split, embedded, fallback-*,
//     overload-*, shadow, region or deny-cache (limit.By*)
//
// RL.RESET key forgets the key's state and answers :1 if it existed, else :0.
func rateCommands() []*command {
	keyArg := docArg{name: "key", typ: "key"}
	costArg := docArg{name: "cost", typ: "integer", optional: true}
	// RL.TAKE and RL.PEEK take the same arguments and give the same reply.
	take := func(name string, op limit.Op, flag, summary string) *command {
		c := &command{
			name: name, minArgs: 2, maxArgs: 3,
			batch: takeRequest(op),
			doc: cmdDoc{summary: summary, group: "rate-limiting", complexity: "O(1)",
				args: []docArg{keyArg, costArg}, flags: []string{flag, "fast"}, firstKey: 1, lastKey: 1, keyStep: 1},
		}
		if op == limit.OpTake {
			c.maxArgs = 4
			c.doc.args = append(c.doc.args, docArg{name: "receipt", typ: "pure-token", token: "RECEIPT", optional: true})
		}
		return c
	}
	// RL.HOTKEYS and RL.REGIONS take no argument and list what this
	// instance holds.
	list := func(name string, run handler, complexity, summary string) *command {
		return &command{
			name: name, minArgs: 1, maxArgs: 1,
			run: run,
			doc: cmdDoc{summary: summary, group: "rate-limiting", complexity: complexity, flags: []string{"readonly"}},
		}
	}
	return []*command{
		take("rl.take", limit.OpTake, "write",
			"Takes cost tokens (default 1) from the key's bucket if they exist. Returns [allowed, limit, remaining, retry_after_ms, reset_after_ms, decided_by], and with RECEIPT 7) the receipt a negative RL.ADJUST names to give this take back (empty when refused)."),
		take("rl.peek", limit.OpPeek, "readonly", "Reports what RL.TAKE would decide, spending nothing."),
		list("rl.hotkeys", cmdHotKeys, "O(N) where N is the number of hot keys",
			"Lists the keys this instance treats as hot: an array of [key, k, policy, p, mode, m, rate, r/s, since_ms, unix ms]."),
		list("rl.regions", cmdRegions, "O(N) where N is the number of global keys",
			"Lists this instance's region first, then the others seen on the demand boards: an array of [region, r, self, 0|1, keys, n, held, tokens, claimed, tokens, returned, tokens, demand, tokens/s, last_home_contact_ms, unix ms or -1]."),
		{
			name: "rl.reset", minArgs: 2, maxArgs: 2,
			flags: flagBarrier | flagAdmin,
			run:   cmdReset,
			doc: cmdDoc{
				summary:    "Forgets the key's state. Returns 1 if it existed, else 0.",
				group:      "rate-limiting",
				complexity: "O(1)",
				args:       []docArg{keyArg},
				flags:      []string{"write"},
				firstKey:   1, lastKey: 1, keyStep: 1,
			},
		},
	}
}

// takeRequest returns the batcher of RL.TAKE or RL.PEEK. RL.TAKE takes a
// last argument RECEIPT (any case, as Redis's option words), after the
// cost or in its place: the reply then has a 7th element, the receipt
// (appendReceipted).
func takeRequest(op limit.Op) batcher {
	return func(c *connState, args [][]byte) (limit.Request, error) {
		if err := c.srv.checkKey(args[1]); err != nil {
			return limit.Request{}, err
		}
		want := false
		if last := args[len(args)-1]; op == limit.OpTake && len(args) > 2 && len(last) == len(receiptWord) && strings.EqualFold(string(last), receiptWord) {
			want, args = true, args[:len(args)-1]
		}
		cost := int64(1)
		switch len(args) {
		case 3:
			var ok bool
			if cost, ok = edge.ParseCost(args[2]); !ok {
				return limit.Request{}, edge.ErrCost
			}
		case 4:
			return limit.Request{}, errSyntax
		}
		r := limit.Request{Key: string(args[1]), Cost: cost, Op: op, WantReceipt: want}
		if want {
			r.User = c.userName() // a receipt is its user's (limit.BindReceipt)
		}
		return r, nil
	}
}

// receiptWord is RL.TAKE's option word.
const receiptWord = "RECEIPT"

// appendReceipted appends the reply of RL.TAKE … RECEIPT: the six fields
// (appendResult) and 7) the receipt, a bulk string, empty when the take
// was refused or answered without the store (nothing to give back).
func appendReceipted(b []byte, r *limit.Result) []byte {
	b = redcon.AppendArray(b, 7)
	b = appendFields(b, r)
	return redcon.AppendBulkString(b, r.Receipt)
}

func cmdReset(c *connState, args [][]byte) (any, error) {
	if err := c.srv.checkKey(args[1]); err != nil {
		return nil, err
	}
	existed, err := c.srv.cfg.Decider.Reset(c.srv.ctx, string(args[1]))
	if err != nil {
		return nil, &decisionError{key: string(args[1]), err: err}
	}
	return existed, nil
}

// cmdHotKeys answers RL.HOTKEYS: one flat field/value array per hot key,
// like CLUSTER SHARDS, so the reply describes itself:
//
//  1. 1) "key"  2) "acme"  3) "policy"  4) "api"  5) "mode"  6) "lease"
//  7. "rate" 8) "5230"  9) "since_ms" 10) (integer) 1764500000000
func cmdHotKeys(c *connState, _ [][]byte) (any, error) {
	if c.srv.cfg.HotKeys == nil {
		return []any{}, nil
	}
	keys := c.srv.cfg.HotKeys()
	out := make([]any, len(keys))
	for i, h := range keys {
		out[i] = []any{"key", h.Key, "policy", h.Policy, "mode", h.Mode,
			"rate", strconv.FormatFloat(h.Rate, 'f', 0, 64), "since_ms", h.Since.UnixMilli()}
	}
	return out, nil
}

// cmdRegions answers RL.REGIONS, one flat field/value array per region as
// RL.HOTKEYS does.
func cmdRegions(c *connState, _ [][]byte) (any, error) {
	if c.srv.cfg.Regions == nil {
		return nil, errNoRegion
	}
	rs := c.srv.cfg.Regions()
	out := make([]any, len(rs))
	for i, r := range rs {
		self := int64(0)
		if r.Self {
			self = 1
		}
		out[i] = []any{"region", r.Name, "self", self, "keys", int64(r.Keys), "held", r.Held, "claimed", r.Claimed,
			"returned", r.Returned, "demand", strconv.FormatFloat(r.Demand, 'f', 1, 64), "last_home_contact_ms", r.LastHomeContact}
	}
	return out, nil
}

// checkKey validates a key argument: not empty, at most MaxKeyBytes.
func (s *Server) checkKey(key []byte) error { return s.keys.CheckBytes(key) }
