package app

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/server"
)

// policySync is how often every instance re-reads the runtime policies,
// besides the Pub/Sub announcement: a missed message heals within this.
const policySync = 500 * time.Millisecond

// policyKeeper is a store that keeps the runtime policies where every
// instance reads them (cluster.Store).
type policyKeeper interface {
	Policies() *cluster.Policies
}

// newRuntime puts the file's policies in force; its Run keeps the runtime
// ones (RL.POLICY SET) in step with the store's backend. The embedded
// store keeps them in memory: one process, nobody to tell.
func newRuntime(h *policy.Holder, file *policy.Set, store limit.Store, log *slog.Logger, applied func(error)) *policy.Runtime {
	var backend policy.Backend = &policy.MemoryBackend{}
	if pk, ok := store.(policyKeeper); ok {
		backend = pk.Policies()
	}
	rt := policy.NewRuntime(h, file, backend)
	rt.OnApply = func(source string, err error) {
		if err != nil {
			log.Error("runtime policies", "err", err)
		} else {
			log.Info("policies in force", "source", source, "policies", len(h.Current().Policies))
		}
		if applied != nil {
			applied(err)
		}
	}
	return rt
}

// policies adapts the reloadable holder to the limiter.
type policies struct{ h *policy.Holder }

func (p policies) Match(key string) *limit.Policy { return p.h.Current().Match(key) }

// clearingPolicies is policies for a limiter with a deny cache: the first
// match under a Set in force that it has not seen (RL.POLICY SET or DEL,
// here or on another instance, or a SIGHUP reload) clears the cache
// before the request is decided. A policy that comes back unchanged keeps
// its pointer (RL.POLICY DEL brings the file's back), but the key's state
// went on under another policy meanwhile: a refusal from before proves
// nothing now.
type clearingPolicies struct {
	h     *policy.Holder
	seen  *atomic.Pointer[policy.Set]
	clear func()
}

func newClearingPolicies(h *policy.Holder, clear func()) clearingPolicies {
	c := clearingPolicies{h: h, seen: &atomic.Pointer[policy.Set]{}, clear: clear}
	c.seen.Store(h.Current())
	return c
}

func (c clearingPolicies) Match(key string) *limit.Policy {
	s := c.h.Current()
	if c.seen.Load() != s && c.seen.Swap(s) != s {
		c.clear()
	}
	return s.Match(key)
}

// policyAdmin adapts policy.Runtime to the server's RL.POLICY.
type policyAdmin struct{ rt *policy.Runtime }

func (a policyAdmin) List() []server.PolicyInfo {
	list := a.rt.List()
	out := make([]server.PolicyInfo, len(list))
	for i, p := range list {
		out[i] = server.PolicyInfo{Name: p.Name, Source: p.Source, Hot: p.Hot}
	}
	return out
}

func (a policyAdmin) Get(name string) (string, bool) { return a.rt.Get(name) }

func (a policyAdmin) Set(ctx context.Context, name, json string) error {
	return a.rt.Set(ctx, name, json)
}

func (a policyAdmin) Del(ctx context.Context, name string) (bool, error) { return a.rt.Del(ctx, name) }
