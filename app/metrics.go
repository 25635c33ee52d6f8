package app

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/hotkey"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/metrics"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/server"
)

// collectMetrics registers the collectors that read, at scrape time, the
// counters the store's breakers, the hot-key layer, the server and the
// policy holder keep anyway. The decision and round-trip metrics come
// from the hooks in limiter.Config and cluster.Config instead.
func collectMetrics(m *metrics.Metrics, store limit.Store, hot *hotkey.Layer, srv *server.Server, h *policy.Holder, lim *limiter.Limiter) error {
	if err := registerCounters(m, nil, lim.Snapshot, []counter[limiter.Snapshot]{
		{"sluice_mtakes_total", "RL.MTAKE calls.", func(s limiter.Snapshot) int64 { return s.MTakes }},
		{"sluice_mtake_refunds_total", "Takes of a refused RL.MTAKE given back.", func(s limiter.Snapshot) int64 { return s.Refunds }},
		{"sluice_mtake_refund_errors_total", "Refunds of a refused RL.MTAKE the store could not make (tokens lost, never over-admitted).", func(s limiter.Snapshot) int64 { return s.RefundFails }},
	}); err != nil {
		return err
	}
	if cs, ok := store.(*cluster.Store); ok {
		if err := m.CollectBreakers(cs.BreakerStates); err != nil {
			return err
		}
	}
	if err := m.CollectHotKeys(hot.Stats); err != nil {
		return err
	}
	if err := m.CollectServer(srv.Stats); err != nil {
		return err
	}
	return m.CollectPolicies(func() int { return len(h.Current().Policies) })
}

// counter is one counter read at scrape time from a snapshot S.
type counter[S any] struct {
	name, help string
	v          func(S) int64
}

// registerCounters registers cs, each reading a fresh snapshot.
func registerCounters[S any](m *metrics.Metrics, labels prometheus.Labels, snapshot func() S, cs []counter[S]) error {
	for _, c := range cs {
		v := c.v
		if err := m.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help, ConstLabels: labels},
			func() float64 { return float64(v(snapshot())) })); err != nil {
			return err
		}
	}
	return nil
}

// readyWithoutStore answers /readyz when the store did not answer its
// ping: the instance is still ready when every policy in force can decide
// without the store (on_store_error open or local), since its replies are
// then as good as they will get; a policy that fails closed would reject
// everything, so traffic is better sent to an instance that reaches Redis.
func readyWithoutStore(w http.ResponseWriter, set *policy.Set, mode string, err error) {
	var closed []string
	for _, p := range set.Policies {
		if p.OnStoreError != limit.FailOpen && p.OnStoreError != limit.FailLocal {
			closed = append(closed, p.Name)
		}
	}
	if len(closed) > 0 {
		http.Error(w, fmt.Sprintf("store unreachable: %v; not ready: on_store_error closed in %s",
			err, strings.Join(closed, ", ")), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintf(w, "ok %s degraded: store unreachable (%v); every policy answers with on_store_error open or local\n", mode, err)
}
