package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// requireRedisServer fails the test, never skips it, when the Redis
// binaries are missing: these tests are the acceptance of the metrics.
func requireRedisServer(t *testing.T) {
	t.Helper()
	redistest.SkipShort(t, "redis-server")
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not found on PATH: install Redis 7 to run this test", bin)
		}
	}
}

var adminAddrRE = regexp.MustCompile(`msg="admin listening" addr=(\S+)`)

// startWithAdmin starts sluice with --admin on a free port and returns it
// with the admin address.
func startWithAdmin(t *testing.T, args ...string) (*proc, string) {
	t.Helper()
	p := startSluice(t, append([]string{"--admin", "127.0.0.1:0"}, args...)...)
	m := adminAddrRE.FindStringSubmatch(p.Logs()) // logged before "sluice listening"
	if m == nil {
		t.Fatalf("no admin address logged:\n%s", p.Logs())
	}
	return p, m[1]
}

// httpGet returns the status and body of http://addr/path.
func httpGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// samples is one scrape: the value of every series, keyed by
// name{label="value",…} with the labels in name order.
type samples map[string]float64

func scrapeMetrics(t *testing.T, addr string) samples {
	t.Helper()
	code, body := httpGet(t, addr, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	s := samples{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		series := line[:i]
		name, labels, _ := strings.Cut(series, "{")
		var pairs []string
		if labels = strings.TrimSuffix(labels, "}"); labels != "" {
			for _, kv := range splitLabels(labels) {
				k, val, _ := strings.Cut(kv, "=")
				uq, err := strconv.Unquote(val)
				if err != nil {
					t.Fatalf("/metrics line %q: label %q: %v", line, kv, err)
				}
				pairs = append(pairs, k, uq)
			}
		}
		s[seriesKey(name, pairs...)] = v
	}
	return s
}

// splitLabels splits `a="x",b="y"` at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

func seriesKey(name string, labels ...string) string {
	var kv []string
	for i := 0; i+1 < len(labels); i += 2 {
		kv = append(kv, labels[i]+"="+strconv.Quote(labels[i+1]))
	}
	slices.Sort(kv)
	return name + "{" + strings.Join(kv, ",") + "}"
}

// v is the value of name{labels}; 0 when the series is absent, as for a
// counter not yet incremented.
func (s samples) v(name string, labels ...string) float64 { return s[seriesKey(name, labels...)] }

// has reports whether the series is present.
func (s samples) has(name string, labels ...string) bool {
	_, ok := s[seriesKey(name, labels...)]
	return ok
}

const metricsPolicies = `
policies:
  - name: strict
    match: "strict:*"
    limit: 3
    rate: 1
    period: 1h
    on_store_error: closed
    deny_cache: false         # the test watches the store and the failure policy, not the deny cache
`

// The acceptance test of the metrics: values scraped from /metrics of
// the real binary in front of a real cluster move by exactly what was
// sent.
func TestMetricsScrapedValuesMove(t *testing.T) {
	t.Parallel()
	requireRedisServer(t)
	c := redistest.NewCluster(t, localredis.Config{})
	p, admin := startWithAdmin(t, "--cluster", strings.Join(c.Addrs(), ","), "--config", writeConfig(t, metricsPolicies))
	cl := p.client(t)
	ctx := context.Background()
	key := "strict:{metrics}"
	owner, err := c.PrimaryForKey(ctx, cluster.Key(key))
	if err != nil {
		t.Fatal(err)
	}

	before := scrapeMetrics(t, admin)
	for _, name := range []string{"sluice_build_info", "go_goroutines", "process_cpu_seconds_total", "sluice_connected_clients", "sluice_hot_keys", "sluice_policies"} {
		found := false
		for k := range before {
			found = found || strings.HasPrefix(k, name+"{")
		}
		if !found {
			t.Errorf("first scrape has no %s", name)
		}
	}

	var allowed, rejected int
	for range 5 {
		r, err := take(ctx, cl, key, 1)
		if err != nil || r.DecidedBy != "store" {
			t.Fatalf("RL.TAKE %s: %+v %v", key, r, err)
		}
		if r.Allowed {
			allowed++
		} else {
			rejected++
		}
	}
	if allowed != 3 || rejected != 2 {
		t.Fatalf("allowed %d rejected %d, want 3 and 2 (limit 3)", allowed, rejected)
	}
	if _, err := take(ctx, cl, "nomatch", 1); err == nil || !strings.Contains(err.Error(), "no policy") {
		t.Fatalf("RL.TAKE of a key no policy matches: %v, want the no-policy error", err)
	}

	after := scrapeMetrics(t, admin)
	delta := func(name string, labels ...string) float64 {
		return after.v(name, labels...) - before.v(name, labels...)
	}
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"sluice_decisions_total", []string{"front", "resp", "policy", "strict", "decided_by", "store", "result", "allowed"}, 3},
		{"sluice_decisions_total", []string{"front", "resp", "policy", "strict", "decided_by", "store", "result", "rejected"}, 2},
		{"sluice_errors_total", []string{"front", "resp", "policy", "", "kind", "no_policy"}, 1},
		{"sluice_errors_total", []string{"front", "resp", "policy", "strict", "kind", "store"}, 0},
		{"sluice_store_errors_total", []string{"node", owner.Addr, "kind", "timeout"}, 0},
	} {
		if got := delta(tc.name, tc.labels...); got != tc.want {
			t.Errorf("%s moved by %v, want %v", seriesKey(tc.name, tc.labels...), got, tc.want)
		}
	}
	// Five requests one after the other: five round trips at least (a
	// NOSCRIPT on a fresh node adds one), none to other nodes.
	if got := delta("sluice_store_latency_seconds_count", "node", owner.Addr); got < 5 {
		t.Errorf("store_latency_seconds_count{node=%s} moved by %v, want at least 5", owner.Addr, got)
	}
	if got := delta("sluice_store_commands_per_pipeline_sum", "node", owner.Addr); got < 5 {
		t.Errorf("store_commands_per_pipeline_sum{node=%s} moved by %v, want at least 5", owner.Addr, got)
	}
	if got := after.v("sluice_store_latency_seconds_bucket", "node", owner.Addr, "le", "+Inf"); got != after.v("sluice_store_latency_seconds_count", "node", owner.Addr) {
		t.Errorf("latency +Inf bucket %v != count %v", got, after.v("sluice_store_latency_seconds_count", "node", owner.Addr))
	}
	if got := after.v("sluice_connected_clients"); got < 1 {
		t.Errorf("connected_clients = %v, want at least 1", got)
	}
	if got := delta("sluice_commands_total"); got < 6 {
		t.Errorf("commands_total moved by %v, want at least 6", got)
	}
	if !after.has("sluice_breaker_state", "node", owner.Addr) || after.v("sluice_breaker_state", "node", owner.Addr) != 0 {
		t.Errorf("breaker_state{node=%s} = %v (present %v), want 0", owner.Addr,
			after.v("sluice_breaker_state", "node", owner.Addr), after.has("sluice_breaker_state", "node", owner.Addr))
	}
	if got := after.v("sluice_policies"); got != 1 {
		t.Errorf("policies = %v, want 1", got)
	}
	if code, body := httpGet(t, admin, "/readyz"); code != http.StatusOK || !strings.Contains(body, "cluster") {
		t.Errorf("/readyz with the cluster up: %d %q, want 200 ok cluster", code, body)
	}
	if code, body := httpGet(t, admin, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %q", code, body)
	}
}

const openPolicies = `
policies:
  - name: lenient
    match: "*"
    limit: 3
    rate: 1
    period: 1h
    on_store_error: open
`

// SIGSTOP the primary that owns the key: the breaker of that node opens,
// timeouts and fast failures are counted, /readyz turns 503 on an instance
// whose policy fails closed and stays 200 (degraded) on one whose policy
// fails open; after SIGCONT the breaker closes again.
func TestMetricsBreakerAndReadyWhilePaused(t *testing.T) {
	t.Parallel()
	requireRedisServer(t)
	// No failover during the pause: the node must come back as it was.
	c := redistest.NewCluster(t, localredis.Config{NodeTimeout: 30 * time.Second})
	seeds := strings.Join(c.Addrs(), ",")
	p, admin := startWithAdmin(t, "--cluster", seeds, "--config", writeConfig(t, metricsPolicies))
	_, openAdmin := startWithAdmin(t, "--cluster", seeds, "--config", writeConfig(t, openPolicies))
	cl := p.client(t)
	ctx := context.Background()
	key := "strict:{breaker}"
	if r, err := take(ctx, cl, key, 1); err != nil || r.DecidedBy != "store" {
		t.Fatalf("before the pause: %+v %v", r, err)
	}
	owner, err := c.PrimaryForKey(ctx, cluster.Key(key))
	if err != nil {
		t.Fatal(err)
	}
	before := scrapeMetrics(t, admin)
	if got := before.v("sluice_breaker_state", "node", owner.Addr); got != 0 {
		t.Fatalf("breaker_state{node=%s} before the pause = %v, want 0", owner.Addr, got)
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

	// Drive requests until a scrape shows the breaker open: 5 timeouts
	// of 50ms open it.
	var during samples
	deadline := time.Now().Add(15 * time.Second)
	for {
		for range 3 {
			r, err := take(ctx, cl, key, 1)
			// overload-closed until the breaker's PING goes unanswered
			// (the node answered within the cool-down), then fallback-closed.
			if err != nil || r.Allowed || (r.DecidedBy != "fallback-closed" && r.DecidedBy != "overload-closed") {
				t.Fatalf("during the pause: %+v %v, want a fallback-closed or overload-closed reject", r, err)
			}
		}
		during = scrapeMetrics(t, admin)
		if during.v("sluice_breaker_state", "node", owner.Addr) == 2 && during.v("sluice_store_errors_total", "node", owner.Addr, "kind", "breaker_open") > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("breaker of %s not open after 15s: state %v, store errors timeout %v breaker_open %v", owner.Addr,
				during.v("sluice_breaker_state", "node", owner.Addr),
				during.v("sluice_store_errors_total", "node", owner.Addr, "kind", "timeout"),
				during.v("sluice_store_errors_total", "node", owner.Addr, "kind", "breaker_open"))
		}
	}
	if got := during.v("sluice_store_errors_total", "node", owner.Addr, "kind", "timeout") - before.v("sluice_store_errors_total", "node", owner.Addr, "kind", "timeout"); got < 1 {
		t.Errorf("store_errors_total{kind=timeout,node=%s} moved by %v, want at least 1", owner.Addr, got)
	}
	if got := during.v("sluice_decisions_total", "front", "resp", "policy", "strict", "decided_by", "fallback-closed", "result", "rejected"); got < 1 {
		t.Errorf("fallback-closed rejects = %v, want at least 1 (the breaker is open)", got)
	}
	if got := during.v("sluice_decisions_total", "front", "resp", "policy", "strict", "decided_by", "fallback-closed", "result", "rejected") +
		during.v("sluice_decisions_total", "front", "resp", "policy", "strict", "decided_by", "overload-closed", "result", "rejected"); got < 3 {
		t.Errorf("fallback-closed and overload-closed rejects = %v, want at least 3", got)
	}
	if got := during.v("sluice_errors_total", "front", "resp", "policy", "strict", "kind", "store") + during.v("sluice_errors_total", "front", "resp", "policy", "strict", "kind", "unavailable"); got != 0 {
		t.Errorf("error replies during the pause: %v, want 0 (on_store_error answers)", got)
	}
	if code, body := httpGet(t, admin, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "strict") {
		t.Errorf("/readyz of the closed instance during the pause: %d %q, want 503 naming the closed policy", code, body)
	}
	if code, body := httpGet(t, openAdmin, "/readyz"); code != http.StatusOK || !strings.Contains(body, "degraded") {
		t.Errorf("/readyz of the open instance during the pause: %d %q, want 200 degraded", code, body)
	}
	if code, _ := httpGet(t, admin, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz during the pause: %d, want 200", code)
	}

	if err := owner.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	// The breaker lets a probe through after its 1s cool-down; keep
	// asking until one succeeds and the scrape shows it closed.
	deadline = time.Now().Add(15 * time.Second)
	for {
		r, err := take(ctx, cl, key, 1)
		if err != nil {
			t.Fatalf("after the pause: %v", err)
		}
		if r.DecidedBy == "store" && scrapeMetrics(t, admin).v("sluice_breaker_state", "node", owner.Addr) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("breaker of %s not closed 15s after SIGCONT (last decided_by %s)", owner.Addr, r.DecidedBy)
		}
		time.Sleep(50 * time.Millisecond) // pacing the poll, not synchronising
	}
	if code, body := httpGet(t, admin, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the pause: %d %q, want 200", code, body)
	}
}

// SIGHUP reloads are counted, good and bad.
func TestMetricsConfigReload(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, metricsPolicies)
	p, admin := startWithAdmin(t, "--config", path, "--watch-config=false") // SIGHUP alone: the watch would count the same writes
	waitFor := func(what string, ok func(samples) bool) samples {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			s := scrapeMetrics(t, admin)
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not seen within 10s:\n%s", what, p.Logs())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	s := scrapeMetrics(t, admin)
	if s.v("sluice_config_reloads_total", "result", "ok") != 0 || s.v("sluice_config_reloads_total", "result", "error") != 0 {
		t.Fatalf("reloads before any SIGHUP: ok %v error %v, want 0 0",
			s.v("sluice_config_reloads_total", "result", "ok"), s.v("sluice_config_reloads_total", "result", "error"))
	}

	if err := os.WriteFile(path, []byte(metricsPolicies+openPolicies[len("\npolicies:\n"):]), 0o600); err != nil {
		t.Fatal(err)
	}
	p.Signal(syscall.SIGHUP)
	s = waitFor("a good reload", func(s samples) bool { return s.v("sluice_config_reloads_total", "result", "ok") == 1 })
	if got := s.v("sluice_policies"); got != 2 {
		t.Errorf("policies after the reload = %v, want 2", got)
	}
	if got := s.v("sluice_config_last_reload_successful"); got != 1 {
		t.Errorf("config_last_reload_successful = %v, want 1", got)
	}

	if err := os.WriteFile(path, []byte("policies:\n  - name: broken\n    limit: -1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.Signal(syscall.SIGHUP)
	s = waitFor("a failed reload", func(s samples) bool { return s.v("sluice_config_reloads_total", "result", "error") == 1 })
	if got := s.v("sluice_config_last_reload_successful"); got != 0 {
		t.Errorf("config_last_reload_successful after a bad file = %v, want 0", got)
	}
	if got := s.v("sluice_config_reloads_total", "result", "ok"); got != 1 {
		t.Errorf("good reloads = %v, want still 1", got)
	}
	if got := s.v("sluice_policies"); got != 2 {
		t.Errorf("policies after a failed reload = %v, want the last good 2", got)
	}
}

// In embedded mode there is no store to lose: always ready.
func TestReadyEmbedded(t *testing.T) {
	t.Parallel()
	_, admin := startWithAdmin(t)
	if code, body := httpGet(t, admin, "/readyz"); code != http.StatusOK || !strings.Contains(body, "embedded") {
		t.Errorf("/readyz: %d %q, want 200 ok embedded", code, body)
	}
	if code, body := httpGet(t, admin, "/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz: %d %q, want 200 ok", code, body)
	}
}
