package app

// What the server reports about itself: INFO's # Sluice section,
// RL.HOTKEYS, and the collectors /metrics reads at scrape time.

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"sort"
	"strings"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/denycache"
	"github.com/sluice-rl/sluice/hotkey"
	"github.com/sluice-rl/sluice/internal/acl"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/metrics"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/server"
)

// writeRequestDurations writes the histogram of sluice's own time per
// request (sluice_request_duration_seconds) as one INFO line of cumulative
// counts by upper bound in µs: request_duration_us:le_100=N,…,le_inf=N.
func writeRequestDurations(w io.Writer, m *metrics.Metrics) {
	bounds, counts := m.RequestDurations()
	if len(bounds) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("request_duration_us:")
	for i, le := range bounds {
		if i > 0 {
			b.WriteByte(',')
		}
		if math.IsInf(le, 1) {
			fmt.Fprintf(&b, "le_inf=%d", counts[i])
		} else {
			fmt.Fprintf(&b, "le_%d=%d", int64(math.Round(le*1e6)), counts[i])
		}
	}
	b.WriteString("\r\n")
	_, _ = io.WriteString(w, b.String())
}

// nodeStatser is a store that keeps counters per Redis node
// (cluster.Store): INFO's node_<addr> lines.
type nodeStatser interface {
	Stats() []cluster.NodeStats
}

// writeInfo appends sluice's own INFO section.
func writeInfo(w io.Writer, mode storeMode, h *policy.Holder, lim *limiter.Limiter, store limit.Store, hot *hotkey.Layer, m *metrics.Metrics) {
	s := lim.Snapshot()
	fmt.Fprintf(w, "# Sluice\r\nstore:%s\r\npolicies:%d\r\ndecisions:%d\r\nallowed:%d\r\nrejected:%d\r\nerror_replies:%d\r\nstore_errors:%d\r\n",
		mode, len(h.Current().Policies), s.Decisions, s.Allowed, s.Rejected, s.Errors, s.StoreErrors)
	writeRequestDurations(w, m)
	paths := make([]string, 0, len(s.ByPath))
	for p := range s.ByPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(w, "decided_by_%s:%d\r\n", strings.ReplaceAll(p, "-", "_"), s.ByPath[p])
	}
	fmt.Fprintf(w, "mtakes:%d\r\nmtake_refunds:%d\r\nmtake_refund_errors:%d\r\n", s.MTakes, s.Refunds, s.RefundFails)
	fmt.Fprintf(w, "adjusts:%d\r\nadjust_tokens_spent:%d\r\nadjust_tokens_returned:%d\r\n", s.Adjusts, s.AdjustSpent, s.AdjustReturned)
	fmt.Fprintf(w, "goroutines:%d\r\n", runtime.NumGoroutine())
	hs := hot.Stats()
	fmt.Fprintf(w, "hot_keys:%d\r\nlease_hits:%d\r\nlease_rejects:%d\r\nlease_claims:%d\r\nlease_tokens_claimed:%d\r\nlease_returns:%d\r\nlease_tokens_returned:%d\r\nlease_return_errors:%d\r\nsplit_decisions:%d\r\nsplit_retries:%d\r\nsplit_handoffs:%d\r\n",
		hs.HotKeys, hs.LeaseHits, hs.LeaseRejects, hs.Claims, hs.TokensClaimed, hs.Returns, hs.TokensReturned, hs.ReturnErrors, hs.SplitDecisions, hs.SplitRetries, hs.SplitHandoffs)
	if ns, ok := store.(nodeStatser); ok {
		for _, n := range ns.Stats() {
			avg, perCall := 0.0, 0.0
			if n.Pipelines > 0 {
				avg = float64(n.Commands) / float64(n.Pipelines)
			}
			if n.Commands > 0 {
				perCall = float64(n.Decisions) / float64(n.Commands)
			}
			fmt.Fprintf(w, "node_%s:breaker=%s,pipelines=%d,commands=%d,decisions=%d,avg_batch=%.2f,decisions_per_call=%.2f,overload=%d,breaker_opens=%d,pipeline_us=%.1f,decision_us=%.2f\r\n",
				n.Addr, n.Breaker, n.Pipelines, n.Commands, n.Decisions, avg, perCall, n.Overload, n.BreakerOpens, float64(n.PipelineCost)/1e3, float64(n.Service)/1e3)
		}
	}
}

// writeDenyInfo appends the deny cache's lines to INFO's # Sluice section.
func writeDenyInfo(w io.Writer, d *denycache.Cache) {
	s := d.Stats()
	fmt.Fprintf(w, "deny_cache_entries:%d\r\ndeny_cache_hits:%d\r\ndeny_cache_added:%d\r\n", s.Entries, s.Hits, s.Added)
}

// hotKeys answers RL.HOTKEYS, the hottest first.
func hotKeys(hot *hotkey.Layer) []server.HotKey {
	hk := hot.HotKeys()
	out := make([]server.HotKey, len(hk))
	for i, k := range hk {
		out[i] = server.HotKey{Key: k.Key, Policy: k.Policy, Mode: string(k.Mode), Rate: k.Rate, Since: k.Since}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rate > out[j].Rate })
	return out
}

// breakerStater is a store with a circuit breaker per node
// (cluster.Store): sluice_breaker_state.
type breakerStater interface {
	BreakerStates() map[string]string
}

// collectMetrics registers the collectors that read, at scrape time, the
// counters the store's breakers, the hot-key layer, the server and the
// policy holder keep anyway. The decision and round-trip metrics come
// from the hooks in limiter.Config and cluster.Config instead.
func collectMetrics(m *metrics.Metrics, store limit.Store, hot *hotkey.Layer, deny *denycache.Cache, srv *server.Server, h *policy.Holder, lim *limiter.Limiter) error {
	if err := metrics.CollectSnapshot(m, nil, lim.Snapshot, []metrics.Counter[limiter.Snapshot]{
		{Name: "sluice_mtakes_total", Help: "RL.MTAKE calls.", Read: func(s limiter.Snapshot) int64 { return s.MTakes }},
		{Name: "sluice_mtake_refunds_total", Help: "Takes of a refused RL.MTAKE given back.", Read: func(s limiter.Snapshot) int64 { return s.Refunds }},
		{Name: "sluice_mtake_refund_errors_total", Help: "Refunds of a refused RL.MTAKE the store could not make (tokens lost, never over-admitted).", Read: func(s limiter.Snapshot) int64 { return s.RefundFails }},
		{Name: "sluice_adjusts_total", Help: "RL.ADJUST calls applied (an error reply is not counted).", Read: func(s limiter.Snapshot) int64 { return s.Adjusts }},
		{Name: "sluice_adjust_tokens_spent_total", Help: "Tokens RL.ADJUST spent without a check (positive deltas).", Read: func(s limiter.Snapshot) int64 { return s.AdjustSpent }},
		{Name: "sluice_adjust_tokens_returned_total", Help: "Tokens RL.ADJUST gave back (negative deltas), never above the limit.", Read: func(s limiter.Snapshot) int64 { return s.AdjustReturned }},
	}); err != nil {
		return err
	}
	if bs, ok := store.(breakerStater); ok {
		if err := m.CollectBreakers(bs.BreakerStates); err != nil {
			return err
		}
	}
	if us, ok := store.(unackedCounter); ok {
		if err := m.Register(newUnackedCollector(us)); err != nil {
			return err
		}
	}
	if err := metrics.CollectSnapshot(m, nil, hot.Stats, hotKeyCounters); err != nil {
		return err
	}
	if err := metrics.CollectSnapshot(m, nil, deny.Stats, denyCounters); err != nil {
		return err
	}
	if err := metrics.CollectSnapshot(m, nil, srv.Stats, serverCounters); err != nil {
		return err
	}
	if err := collectSlots(m, lim); err != nil {
		return err
	}
	return m.CollectPolicies(func() int { return len(h.Current().Policies) })
}

// countRefusal counts each refusal of a door's permission check (every
// door adds them to ACL LOG) in sluice_errors_total: a key refused under
// its policy (the key is matched, never a label), a command or a password
// under no policy.
func countRefusal(m *metrics.Metrics, match limiter.Matcher) func(acl.Entry) {
	return func(e acl.Entry) {
		front := "resp"
		switch e.Context {
		case "http", "grpc":
			front = e.Context
		}
		kind := metrics.ErrorNoPerm
		var p *limit.Policy
		switch e.Reason {
		case acl.ReasonAuth:
			kind = metrics.ErrorAuth
		case acl.ReasonKey:
			p = match.Match(e.Object)
		}
		m.Refused(front, p, kind)
	}
}

// readyWithoutStore answers /readyz when the store did not answer its
// ping: the instance is still ready when every policy in force can decide
// without the store (on_store_error open or local), since its replies are
// then as good as they will get; a policy that fails closed would reject
// everything, so traffic is better sent to an instance that reaches Redis.
func readyWithoutStore(w http.ResponseWriter, set *policy.Set, mode storeMode, err error) {
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
