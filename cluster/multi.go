package cluster

import (
	"context"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/lua"
)

var _ limit.Atomic = (*Store)(nil)

// Group is the hash slot of the Redis key of key under p: the keys of one
// slot live on one node and can go to one script. A single node is one
// group.
func (s *Store) Group(key string, p *limit.Policy) int {
	if s.cc == nil {
		return 0
	}
	return Slot(spaceKeyOf(p, key))
}

// DoAll takes every request or none with one call of the multi-key script
// on the node that owns the slot of every key (lua.Multi). It goes through
// the node's queue like any other request, so it shares pipelines, the
// breaker, NOSCRIPT reloading and redirections.
func (s *Store) DoAll(ctx context.Context, reqs []limit.Request, out []limit.Result) bool {
	fail := func(err error) bool {
		for i := range out {
			out[i] = limit.Result{Err: err}
		}
		return false
	}
	keys := make([]any, len(reqs))
	argv := make([]any, 0, 5*len(reqs))
	for i := range reqs {
		pa, err := s.policyArgs(reqs[i].Policy)
		if err != nil {
			return fail(err)
		}
		keys[i] = SpaceKey(reqs[i].Policy.Space, reqs[i].Key)
		argv = append(argv, pa.id, pa.limit, pa.rate, pa.unit, reqs[i].Cost)
	}
	it := &item{key: keys[0].(string), script: lua.Multi, multi: make([]limit.Result, len(reqs))}
	for i := range reqs {
		if d := durableOf(&reqs[i]); d != "" {
			it.durable = d // all or nothing: the whole call waits for a replica
			break
		}
	}
	it.args = append(append([]any{"evalsha", lua.Multi.SHA, len(reqs)}, keys...), argv...)
	var err error
	if it.addr, err = s.route(ctx, it.key); err != nil {
		return fail(err)
	}
	res := make([]limit.Result, 1)
	s.rounds(ctx, []*item{it}, res)
	if res[0].Err != nil {
		return fail(res[0].Err)
	}
	copy(out, it.multi) // the worker is done with it: round saw its unit finish
	return res[0].Allowed
}
