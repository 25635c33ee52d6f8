package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// dashboardPolicies has a policy for each path the dashboard shows:
// strict for store decisions, the deny cache and the breaker of a paused
// node (fallback-closed), hot for leases, slow for a node that answers
// late (overload-closed: never refused by the store, so the deny cache
// cannot answer for it), llm for receipts and RL.ADJUST.
const dashboardPolicies = `
policies:
  - name: strict
    match: "strict:*"
    limit: 3
    rate: 1
    period: 1h
    on_store_error: closed
    hot: {mode: off}
  - name: hot
    match: "hot:*"
    limit: 1000000
    rate: 1000000
    period: 1s
    on_store_error: open
    hot: {mode: lease, threshold: 100}
  - name: slow
    match: "slow:*"
    limit: 1000000
    rate: 1000000
    period: 1s
    on_store_error: closed
    hot: {mode: off}
  - name: llm
    match: "llm:*"
    limit: 1000
    rate: 10
    period: 1s
    on_store_error: local
`

const dashboardACL = "user default on nopass ~* +@all\nuser acme on >acme-secret ~acme:* +@limit\n"

// TestDashboardAndRulesMatchExport runs the real binary in front of a
// real Redis Cluster, makes traffic down every path the dashboard shows —
// store decisions and rejections, the deny cache, a hot key on lease, an
// error Redis returns (WRONGTYPE), a key no policy matches, a NOPERM, a
// receipt given back and one reused, a primary made slow with DEBUG SLEEP
// (overload-closed), a primary paused until its breaker opens
// (fallback-closed, store timeouts), a bad reload —
// and fails when the dashboard or a rule names a metric, a label, or a
// value of a positive matcher that the scrape of /metrics does not have.
func TestDashboardAndRulesMatchExport(t *testing.T) {
	t.Parallel()
	dash, problems := loadDashboard(t, dashboardPath)
	rules, more := loadRules(t, rulesPath, operationsDoc)
	for _, p := range append(problems, more...) {
		t.Error(p)
	}
	// No failover during the pause: the node must come back as it was.
	c := redistest.NewCluster(t, localredis.Config{NodeTimeout: 30 * time.Second})
	config := writeConfig(t, dashboardPolicies)
	p, admin := startWithAdmin(t, "--cluster", strings.Join(c.Addrs(), ","), "--config", config, "--aclfile", writeACL(t, dashboardACL))
	cl := p.client(t)
	ctx := t.Context()

	// Store decisions, then refusals from the deny cache.
	seen := map[string]int{}
	for range 10 {
		r, err := take(ctx, cl, "strict:{a}", 1)
		if err != nil {
			t.Fatalf("RL.TAKE strict:{a}: %v", err)
		}
		seen[r.DecidedBy+" "+fmt.Sprint(r.Allowed)]++
	}
	if seen["store true"] != 3 || seen["store false"] < 1 || seen["deny-cache false"] < 1 {
		t.Fatalf("10 takes of limit 3: %v, want 3 store admissions, then store and deny-cache refusals", seen)
	}
	// Refused before a decision: no policy, NOPERM, WRONGTYPE.
	if _, err := take(ctx, cl, "nomatch", 1); err == nil || !strings.Contains(err.Error(), "no policy") {
		t.Fatalf("RL.TAKE nomatch: %v, want the no-policy error", err)
	}
	acme := redis.NewClient(&redis.Options{Addr: p.Addr, Username: "acme", Password: "acme-secret", MaxRetries: -1})
	t.Cleanup(func() { _ = acme.Close() })
	if _, err := take(ctx, acme, "strict:{a}", 1); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("acme's RL.TAKE strict:{a}: %v, want NOPERM", err)
	}
	if err := c.ClusterClient().Set(ctx, cluster.Key("strict:{wrong}"), "not a bucket", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := take(ctx, cl, "strict:{wrong}", 1); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("RL.TAKE of a key Redis holds as a string: %v, want WRONGTYPE", err)
	}
	// Corrections: a receipt given back, then reused; a spend.
	v, err := cl.Do(ctx, "RL.TAKE", "llm:{1}", 50, "RECEIPT").Slice()
	if err != nil || len(v) != 7 || v[0] != int64(1) {
		t.Fatalf("RL.TAKE llm:{1} 50 RECEIPT = %v, %v", v, err)
	}
	receipt, _ := v[6].(string)
	if _, err := cl.Do(ctx, "RL.ADJUST", "llm:{1}", -50, receipt).Slice(); err != nil {
		t.Fatalf("RL.ADJUST with the receipt: %v", err)
	}
	if _, err := cl.Do(ctx, "RL.ADJUST", "llm:{1}", -50, receipt).Slice(); err == nil {
		t.Fatal("RL.ADJUST with a used receipt: no error")
	}
	if _, err := cl.Do(ctx, "RL.ADJUST", "llm:{1}", 20).Slice(); err != nil {
		t.Fatalf("RL.ADJUST +20: %v", err)
	}
	// A hot key: pipelines of takes until some are decided by lease.
	h := runHammer(t, []*redis.Client{cl}, "hot:{x}", func(h *hotLoad) bool { return h.by[0]["lease"] > 0 })
	if h.by[0]["lease"] == 0 {
		t.Fatalf("hot:{x} never decided by lease: %v", h.by[0])
	}

	// A slow primary: a take that reaches it while it sleeps (DEBUG
	// SLEEP, from a client of its own) times out while the node keeps
	// answering, which is overload (on_overload: closed, as on_store_error).
	slowKey := "slow:{1}"
	slow, err := c.PrimaryForKey(ctx, cluster.Key(slowKey))
	if err != nil {
		t.Fatal(err)
	}
	side := redis.NewClient(&redis.Options{Addr: slow.Addr})
	t.Cleanup(func() { _ = side.Close() })
	overloaded := false
	slowBy := map[string]int{}
	for round := 0; round < 20 && !overloaded; round++ {
		slept := make(chan error, 1)
		go func() { slept <- side.Do(ctx, "DEBUG", "SLEEP", "0.3").Err() }()
		for i := 0; i < 50 && !overloaded; i++ {
			r, err := take(ctx, cl, slowKey, 1)
			if err != nil {
				t.Fatalf("RL.TAKE %s while %s sleeps: %v", slowKey, slow.Addr, err)
			}
			slowBy[r.DecidedBy]++
			overloaded = r.DecidedBy == "overload-closed"
		}
		if err := <-slept; err != nil {
			t.Fatalf("DEBUG SLEEP on %s: %v", slow.Addr, err)
		}
	}
	if !overloaded {
		t.Fatalf("no take of %s decided by overload-closed in 20 sleeps of %s: %v", slowKey, slow.Addr, slowBy)
	}
	t.Logf("takes of %s while %s slept: %v", slowKey, slow.Addr, slowBy)

	// A paused primary: its breaker opens, and its keys are decided by
	// on_store_error (fallback-closed).
	key := "strict:{paused}"
	owner, err := c.PrimaryForKey(ctx, cluster.Key(key))
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = owner.Resume()
		}
	})
	var during map[string]*dto.MetricFamily
	paused := time.Now()
	deadline := paused.Add(20 * time.Second)
	for {
		for range 5 {
			if _, err := take(ctx, cl, key, 1); err != nil {
				t.Fatalf("RL.TAKE %s during the pause: %v", key, err)
			}
		}
		during = scrapeFamilies(t, admin)
		by := decidedBy(during, "strict")
		if gauge(during, "sluice_breaker_state", "node", owner.Addr) == 2 && by["fallback-closed"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s of pause: breaker of %s %v, strict decided by %v; want the breaker open (2) and fallback-closed",
				owner.Addr, gauge(during, "sluice_breaker_state", "node", owner.Addr), by)
		}
	}
	t.Logf("breaker of %s open %v after SIGSTOP; strict decided by %v", owner.Addr, time.Since(paused).Round(time.Millisecond), decidedBy(during, "strict"))
	if err := owner.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true

	// A bad reload keeps the last good config.
	if err := os.WriteFile(config, []byte("policies:\n  - name: broken\n    limit: -1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.Signal(syscall.SIGHUP)
	var final map[string]*dto.MetricFamily
	for deadline := time.Now().Add(10 * time.Second); ; {
		final = scrapeFamilies(t, admin)
		if gauge(final, "sluice_config_last_reload_successful") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("config_last_reload_successful still 1 10s after a bad SIGHUP:\n%s", p.Logs())
		}
		time.Sleep(20 * time.Millisecond) // pacing the poll
	}

	// The traffic moved the per-policy series it was meant to.
	for _, tc := range []struct {
		name   string
		labels []string
	}{
		{"sluice_decisions_total", []string{"policy", "strict", "decided_by", "store", "result", "allowed"}},
		{"sluice_decisions_total", []string{"policy", "strict", "decided_by", "deny-cache", "result", "rejected"}},
		{"sluice_decisions_total", []string{"policy", "hot", "decided_by", "lease"}},
		{"sluice_decisions_total", []string{"policy", "strict", "decided_by", "fallback-closed"}},
		{"sluice_decisions_total", []string{"policy", "slow", "decided_by", "overload-closed"}},
		{"sluice_errors_total", []string{"front", "resp", "policy", "", "kind", "no_policy"}},
		{"sluice_errors_total", []string{"front", "resp", "policy", "strict", "kind", "noperm"}},
		{"sluice_errors_total", []string{"front", "resp", "policy", "strict", "kind", "store"}},
		{"sluice_errors_total", []string{"front", "resp", "policy", "llm", "kind", "receipt"}},
		{"sluice_corrections_total", []string{"policy", "llm", "kind", "give_back", "decided_by", "store"}},
		{"sluice_corrections_total", []string{"policy", "llm", "kind", "spend", "decided_by", "store"}},
		{"sluice_correction_tokens_total", []string{"policy", "llm", "kind", "give_back"}},
		{"sluice_store_errors_total", []string{"node", owner.Addr, "kind", "timeout"}},
		{"sluice_overload_total", []string{"node", slow.Addr}},
		{"sluice_config_reloads_total", []string{"result", "error"}},
	} {
		if got := famSum(final, tc.name, tc.labels...); got < 1 {
			t.Errorf("%s%v = %v, want at least 1", tc.name, tc.labels, got)
		}
	}
	if got := famSum(final, "sluice_correction_tokens_total", "policy", "llm", "kind", "give_back"); got != 50 {
		t.Errorf("tokens given back under llm = %v, want 50 (the receipt's take, once)", got)
	}

	if got := gauge(during, "sluice_breaker_state", "node", slow.Addr); got != 0 && slow.Addr != owner.Addr {
		t.Errorf("breaker of the slow node %s = %v during the other's pause, want 0 (slow is not dead)", slow.Addr, got)
	}

	// Every name in the dashboard and the rules is in the scrape.
	for _, e := range append(dash, rules...) {
		for _, p := range checkRefs(e.expr, final) {
			t.Errorf("%s: %s\n\texpr: %s", e.where, p, e.expr)
		}
	}
	t.Logf("checked %d dashboard and %d rule expressions against %d exported families", len(dash), len(rules), len(final))
}

// scrapeFamilies parses /metrics of admin with expfmt.
func scrapeFamilies(t *testing.T, admin string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet(t, admin, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// famSum adds the values of the counters or gauges of name whose labels
// include labels (pairs).
func famSum(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	var total float64
series:
	for _, s := range f.GetMetric() {
		have := map[string]string{}
		for _, lp := range s.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if v, ok := have[labels[i]]; !ok && labels[i+1] != "" || v != labels[i+1] {
				continue series
			}
		}
		total += s.GetCounter().GetValue() + s.GetGauge().GetValue()
	}
	return total
}

// gauge is the value of the gauge name{labels}.
func gauge(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	return famSum(fams, name, labels...)
}

// decidedBy sums the decisions of the policy called name by decided_by.
func decidedBy(fams map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	f := fams["sluice_decisions_total"]
	if f == nil {
		return out
	}
	for _, s := range f.GetMetric() {
		var p, by string
		for _, lp := range s.GetLabel() {
			switch lp.GetName() {
			case "policy":
				p = lp.GetValue()
			case "decided_by":
				by = lp.GetValue()
			}
		}
		if p == name {
			out[by] += s.GetCounter().GetValue()
		}
	}
	return out
}
