package app

import (
	"context"
	"log/slog"
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

// policies adapts the reloadable holder to the limiter: the plain Match
// of the Set in force. A change of the Set clears what was decided under
// the old one by the holder's hook (App.policiesChanged), not here.
type policies struct{ h *policy.Holder }

func (p policies) Match(key string) *limit.Policy { return p.h.Current().Match(key) }

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
