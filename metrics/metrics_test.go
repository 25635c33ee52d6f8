package metrics

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/local"
)

// redisErr stands for an error reply of Redis (go-redis's redis.Error).
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

func TestDecisions(t *testing.T) {
	t.Parallel()
	m := New("test")
	api := &limit.Policy{Name: "api"}
	login := &limit.Policy{Name: "login"}
	for range 3 {
		m.Decision("resp", api, &limit.Result{Allowed: true, DecidedBy: limit.ByStore})
	}
	m.Decision("resp", api, &limit.Result{DecidedBy: limit.ByStore})
	m.Decision("resp", login, &limit.Result{DecidedBy: limit.ByFallbackClosed})
	m.Decision("grpc", login, &limit.Result{DecidedBy: limit.ByFallbackClosed})
	if got := value(t, m.reg, "sluice_decisions_total", "front", "grpc", "policy", "login", "result", "rejected"); got != 1 {
		t.Errorf("decisions_total{front=grpc,login,rejected} = %v, want 1", got)
	}

	for _, tc := range []struct {
		policy, by, result string
		want               float64
	}{
		{"api", "store", "allowed", 3},
		{"api", "store", "rejected", 1},
		{"login", "fallback-closed", "rejected", 1},
		{"login", "store", "allowed", 0},
	} {
		if got := value(t, m.reg, "sluice_decisions_total", "front", "resp", "policy", tc.policy, "decided_by", tc.by, "result", tc.result); got != tc.want {
			t.Errorf("decisions_total{%s,%s,%s} = %v, want %v", tc.policy, tc.by, tc.result, got, tc.want)
		}
	}
}

func TestDecisionErrors(t *testing.T) {
	t.Parallel()
	m := New("test")
	api := &limit.Policy{Name: "api"}
	m.DecisionError("resp", nil, fmt.Errorf("%w 'x'", limit.ErrNoPolicy))
	m.DecisionError("resp", api, fmt.Errorf("redis 127.0.0.1:7000: %w", redisErr("WRONGTYPE Operation against a key holding the wrong kind of value")))
	m.DecisionError("http", api, fmt.Errorf("redis: %w", redisErr("ERR Error running script")))
	m.DecisionError("resp", api, &limit.UnavailableError{Err: errors.New("i/o timeout")})
	m.DecisionError("resp", api, errors.New("cluster: unexpected script reply [1]"))
	m.DecisionError("resp", api, local.ErrFull)
	m.DecisionError("resp", api, limit.ErrReceiptInvalid)
	m.DecisionError("grpc", api, fmt.Errorf("wrapped: %w", limit.ErrReceiptMissing))
	m.DecisionError("resp", api, &limit.AlgorithmError{Command: "rl.take", Policy: "api", Algorithm: limit.Concurrency})
	m.DecisionError("resp", api, &limit.AdjustError{Policy: "api", Why: "global"})
	m.DecisionError("resp", api, &limit.SlotTTLError{Policy: "api"})
	m.Refused("http", api, ErrorNoPerm)
	m.Refused("resp", nil, ErrorAuth)
	want := map[string]float64{ErrorNoPolicy: 1, ErrorStore: 2, ErrorUnavailable: 1, ErrorInternal: 1, ErrorFull: 1,
		ErrorReceipt: 2, ErrorWrongAlgorithm: 1, ErrorNotAdjustable: 1, ErrorMaxTTL: 1, ErrorNoPerm: 1, ErrorAuth: 1}
	for _, k := range errorKinds {
		if got := sum(t, m.reg, "sluice_errors_total", "kind", k); got != want[k] {
			t.Errorf("errors_total{kind=%q} = %v, want %v", k, got, want[k])
		}
	}
	for _, tc := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"front", "resp", "policy", "", "kind", ErrorNoPolicy}, 1},
		{[]string{"front", "resp", "policy", "api", "kind", ErrorStore}, 1},
		{[]string{"front", "http", "policy", "api", "kind", ErrorStore}, 1},
		{[]string{"front", "grpc", "policy", "api", "kind", ErrorReceipt}, 1},
		{[]string{"front", "http", "policy", "api", "kind", ErrorNoPerm}, 1},
		{[]string{"front", "resp", "policy", "", "kind", ErrorAuth}, 1},
	} {
		if got := sum(t, m.reg, "sluice_errors_total", tc.labels...); got != tc.want {
			t.Errorf("errors_total%v = %v, want %v", tc.labels, got, tc.want)
		}
	}
}

func TestConfigReload(t *testing.T) {
	t.Parallel()
	m := New("test")
	if got := value(t, m.reg, "sluice_config_last_reload_successful"); got != 1 {
		t.Errorf("config_last_reload_successful before any reload = %v, want 1", got)
	}
	m.ConfigReload(true)
	m.ConfigReload(true)
	m.ConfigReload(false)
	if got := value(t, m.reg, "sluice_config_reloads_total", "result", "ok"); got != 2 {
		t.Errorf(`config_reloads_total{result="ok"} = %v, want 2`, got)
	}
	if got := value(t, m.reg, "sluice_config_reloads_total", "result", "error"); got != 1 {
		t.Errorf(`config_reloads_total{result="error"} = %v, want 1`, got)
	}
	if got := value(t, m.reg, "sluice_config_last_reload_successful"); got != 0 {
		t.Errorf("config_last_reload_successful after a failure = %v, want 0", got)
	}
}

func TestStore(t *testing.T) {
	t.Parallel()
	m := New("test")
	o := m.Store
	o.Pipeline("10.0.0.1:7000", 300*time.Microsecond, 4)
	o.Pipeline("10.0.0.1:7000", 2*time.Millisecond, 1)
	o.Pipeline("10.0.0.2:7001", time.Millisecond, 8)
	o.Error("10.0.0.1:7000", "timeout")
	o.Error("10.0.0.1:7000", "timeout")
	o.Error("10.0.0.2:7001", "breaker_open")
	o.Overload("10.0.0.2:7001")

	want := `
# HELP sluice_store_commands_per_pipeline Script calls sent in one pipeline to a Redis node: how well concurrent requests are batched.
# TYPE sluice_store_commands_per_pipeline histogram
sluice_store_commands_per_pipeline_bucket{node="10.0.0.1:7000",le="1"} 1
sluice_store_commands_per_pipeline_bucket{node="10.0.0.1:7000",le="2"} 1
sluice_store_commands_per_pipeline_bucket{node="10.0.0.1:7000",le="4"} 2
sluice_store_commands_per_pipeline_bucket{node="10.0.0.1:7000",le="8"} 2
sluice_store_commands_per_pipeline_bucket{node="10.0.0.1:7000",le="16"} 2
sluice_store_commands_per_pipeline_bucket{node="10.0.0.1:7000",le="32"} 2
sluice_store_commands_per_pipeline_bucket{node="10.0.0.1:7000",le="64"} 2
sluice_store_commands_per_pipeline_bucket{node="10.0.0.1:7000",le="128"} 2
sluice_store_commands_per_pipeline_bucket{node="10.0.0.1:7000",le="256"} 2
sluice_store_commands_per_pipeline_bucket{node="10.0.0.1:7000",le="512"} 2
sluice_store_commands_per_pipeline_bucket{node="10.0.0.1:7000",le="+Inf"} 2
sluice_store_commands_per_pipeline_sum{node="10.0.0.1:7000"} 5
sluice_store_commands_per_pipeline_count{node="10.0.0.1:7000"} 2
sluice_store_commands_per_pipeline_bucket{node="10.0.0.2:7001",le="1"} 0
sluice_store_commands_per_pipeline_bucket{node="10.0.0.2:7001",le="2"} 0
sluice_store_commands_per_pipeline_bucket{node="10.0.0.2:7001",le="4"} 0
sluice_store_commands_per_pipeline_bucket{node="10.0.0.2:7001",le="8"} 1
sluice_store_commands_per_pipeline_bucket{node="10.0.0.2:7001",le="16"} 1
sluice_store_commands_per_pipeline_bucket{node="10.0.0.2:7001",le="32"} 1
sluice_store_commands_per_pipeline_bucket{node="10.0.0.2:7001",le="64"} 1
sluice_store_commands_per_pipeline_bucket{node="10.0.0.2:7001",le="128"} 1
sluice_store_commands_per_pipeline_bucket{node="10.0.0.2:7001",le="256"} 1
sluice_store_commands_per_pipeline_bucket{node="10.0.0.2:7001",le="512"} 1
sluice_store_commands_per_pipeline_bucket{node="10.0.0.2:7001",le="+Inf"} 1
sluice_store_commands_per_pipeline_sum{node="10.0.0.2:7001"} 8
sluice_store_commands_per_pipeline_count{node="10.0.0.2:7001"} 1
# HELP sluice_store_errors_total Commands to a Redis node that failed or were sent back, by kind: timeout, connection, cluster_down, tryagain, moved_ask, noscript, breaker_open, redis_error.
# TYPE sluice_store_errors_total counter
sluice_store_errors_total{kind="breaker_open",node="10.0.0.2:7001"} 1
sluice_store_errors_total{kind="timeout",node="10.0.0.1:7000"} 2
sluice_overload_total{node="10.0.0.2:7001"} 1
`
	hasLines(t, scrape(t, m), want)
	for node, want := range map[string]float64{"10.0.0.1:7000": 2, "10.0.0.2:7001": 1} {
		if got := value(t, m.reg, "sluice_store_latency_seconds", "node", node); got != want {
			t.Errorf("store_latency_seconds_count{node=%q} = %v, want %v", node, got, want)
		}
	}
}

// stats stands for another package's counters, read at scrape time.
type stats struct{ Open, Total int64 }

func TestCollectors(t *testing.T) {
	t.Parallel()
	m := New("v1.2.3")
	breakers := map[string]string{"a:1": "closed", "b:2": "half-open", "c:3": "open"}
	var st stats
	var mu sync.Mutex
	snapshots := 0
	if err := m.CollectBreakers(func() map[string]string { return breakers }); err != nil {
		t.Fatal(err)
	}
	if err := CollectSnapshot(m, nil, func() stats { mu.Lock(); defer mu.Unlock(); snapshots++; return st }, []Counter[stats]{
		{Name: "sluice_things_open", Help: "Things open now.", Read: func(s stats) int64 { return s.Open }},
		{Name: "sluice_things_total", Help: "Things opened.", Read: func(s stats) int64 { return s.Total }},
	}); err != nil {
		t.Fatal(err)
	}
	if err := CollectSnapshot(m, prometheus.Labels{"region": "eu"}, func() stats { return stats{Total: 5} }, []Counter[stats]{
		{Name: "sluice_region_things_total", Help: "Things of a region.", Read: func(s stats) int64 { return s.Total }},
	}); err != nil {
		t.Fatal(err)
	}
	hasLines(t, scrape(t, m), `
# HELP sluice_breaker_state Circuit breaker of a Redis node: 0 closed (requests flow), 1 half-open (one probe in flight), 2 open (requests fail fast to on_store_error).
# TYPE sluice_breaker_state gauge
sluice_breaker_state{node="a:1"} 0
sluice_breaker_state{node="b:2"} 1
sluice_breaker_state{node="c:3"} 2
`)

	before := scrape(t, m)
	mu.Lock()
	st = stats{Open: 4, Total: 9}
	n := snapshots
	mu.Unlock()
	after := scrape(t, m)
	mu.Lock()
	if got := snapshots - n; got != 1 {
		t.Errorf("one scrape took %d snapshots, want 1 for every counter of it", got)
	}
	mu.Unlock()
	for _, line := range []string{"# TYPE sluice_things_open gauge\nsluice_things_open 0\n", "# TYPE sluice_things_total counter\nsluice_things_total 0\n"} {
		if !strings.Contains(before, line) {
			t.Errorf("first scrape lacks %q", line)
		}
	}
	for _, line := range []string{
		"sluice_things_open 4", "sluice_things_total 9", `sluice_region_things_total{region="eu"} 5`,
		`sluice_build_info{goversion="`, `version="v1.2.3"} 1`,
		"go_goroutines ", "process_cpu_seconds_total ",
	} {
		if !strings.Contains(after, line) {
			t.Errorf("second scrape lacks %q", line)
		}
	}
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if problems, err := promlint.NewWithMetricFamilies(mfs).Lint(); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// scrape reads Handler's text exposition.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The hooks run on the hot path: once a label combination has been seen,
// they must not allocate.
func TestHooksDoNotAllocate(t *testing.T) {
	m := New("test")
	p := &limit.Policy{Name: "api"}
	r := &limit.Result{Allowed: true, DecidedBy: limit.ByStore}
	m.Decision("resp", p, r)
	m.Store.Pipeline("n:1", time.Millisecond, 3)
	m.Store.Error("n:1", "timeout")
	m.Store.Overload("n:1")
	receipt := fmt.Errorf("wrapped: %w", limit.ErrReceiptInvalid)
	m.DecisionError("resp", p, receipt)
	m.Correction("resp", p, limiter.CorrectionGiveBack, limit.ByStore, 3)
	for name, f := range map[string]func(){
		"Decision":      func() { m.Decision("resp", p, r) },
		"DecisionError": func() { m.DecisionError("resp", p, receipt) },
		"Correction":    func() { m.Correction("resp", p, limiter.CorrectionGiveBack, limit.ByStore, 3) },
		"Pipeline":      func() { m.Store.Pipeline("n:1", time.Millisecond, 3) },
		"Error":         func() { m.Store.Error("n:1", "timeout") },
		"Overload":      func() { m.Store.Overload("n:1") },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}

// Many goroutines meeting new label combinations at once count every
// call exactly once.
func TestCacheConcurrent(t *testing.T) {
	t.Parallel()
	m := New("test")
	policies := make([]*limit.Policy, 20)
	for i := range policies {
		policies[i] = &limit.Policy{Name: fmt.Sprintf("p%d", i)}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				p := policies[(i+g)%len(policies)]
				m.Decision("resp", p, &limit.Result{Allowed: i%2 == 0, DecidedBy: limit.ByStore})
			}
		})
	}
	wg.Wait()
	var total float64
	for _, p := range policies {
		for _, res := range []string{"allowed", "rejected"} {
			total += value(t, m.reg, "sluice_decisions_total", "policy", p.Name, "decided_by", "store", "result", res)
		}
	}
	if total != 8000 {
		t.Errorf("sum of decisions_total = %v, want 8000", total)
	}
}

func BenchmarkDecision(b *testing.B) {
	m := New("bench")
	p := &limit.Policy{Name: "api"}
	r := &limit.Result{Allowed: true, DecidedBy: limit.ByStore}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Decision("resp", p, r)
		}
	})
}

// value is the value of the counter or gauge name{labels}, or the sample
// count of the histogram; 0 when there is no such series.
func value(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue series
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			}
			t.Fatalf("%s has type %v", name, mf.GetType())
		}
	}
	return 0
}

// hasLines checks that every line of want that is not a comment is a line
// of the exposition text got.
func hasLines(t *testing.T, got, want string) {
	t.Helper()
	lines := map[string]bool{}
	for _, l := range strings.Split(got, "\n") {
		lines[l] = true
	}
	for _, l := range strings.Split(strings.TrimSpace(want), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") && !lines[l] {
			t.Errorf("scrape lacks %q", l)
		}
	}
}

// The request histogram counts one sample per command of a pipeline, and
// RequestDurations reads it back cumulative, +Inf last.
func TestRequestDurations(t *testing.T) {
	m := New("test")
	m.Pipeline(3*time.Millisecond, 4) // four commands read together
	m.Pipeline(90*time.Millisecond, 1)
	m.Pipeline(3*time.Second, 1)
	bounds, counts := m.RequestDurations()
	if len(bounds) != len(counts) || len(bounds) < 2 || !math.IsInf(bounds[len(bounds)-1], 1) {
		t.Fatalf("bounds %v counts %v: want equal lengths, +Inf last", bounds, counts)
	}
	at := func(le float64) uint64 {
		for i, b := range bounds {
			if b == le {
				return counts[i]
			}
		}
		t.Fatalf("no bound %v in %v", le, bounds)
		return 0
	}
	if got := [3]uint64{at(.0025), at(.005), at(.1)}; got != [3]uint64{0, 4, 5} {
		t.Errorf("cumulative counts at 2.5ms, 5ms, 100ms = %v, want [0 4 5]", got)
	}
	if got := counts[len(counts)-1]; got != 6 {
		t.Errorf("+Inf count %d, want 6", got)
	}
}
