package cluster

import (
	"context"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/lua"
)

var _ limit.SlotStore = (*Store)(nil)

// Acquire takes one of p's slots under key for token (lua.Acquire on the
// key's sorted set, SpaceKey as every state). It goes through the node's
// queue like any request: pipelines, the breaker, NOSCRIPT reloading,
// redirections, and no replay of a call that timed out.
func (s *Store) Acquire(ctx context.Context, key string, p *limit.Policy, token string, ttlMs int64) limit.Result {
	k := SpaceKey(p.Space, key)
	durable := ""
	if p.Durable() {
		// A slot lost in a failover lets limit+1 in: an acquire waits
		// for a replica as a take does (durable.go). A release does not:
		// a lost one holds a slot until its TTL, never one too many.
		durable = p.Name
	}
	return s.one(ctx, k, lua.Acquire, []any{"evalsha", lua.Acquire.SHA, 1, k, p.Limit, ttlMs, token}, durable)
}

// Release frees the slot token holds under key (lua.Release).
func (s *Store) Release(ctx context.Context, key string, p *limit.Policy, token string) (bool, error) {
	k := SpaceKey(p.Space, key)
	res := s.one(ctx, k, lua.Release, []any{"evalsha", lua.Release.SHA, 1, k, token}, "")
	return res.Allowed, res.Err
}

// one sends one script call on key, args its whole EVALSHA command, and
// returns its seven integers as a Result;
// durable is the item's durable field.
func (s *Store) one(ctx context.Context, key string, script *lua.Script, args []any, durable string) limit.Result {
	it := &item{key: key, script: script, args: args, durable: durable}
	var err error
	if it.addr, err = s.route(ctx, key); err != nil {
		return limit.Result{Err: err}
	}
	res := make([]limit.Result, 1)
	s.rounds(ctx, []*item{it}, res)
	return res[0]
}
