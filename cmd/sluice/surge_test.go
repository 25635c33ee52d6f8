package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// surgePolicies: the tenant, far over its limit, failing open.
// The timeout is short, so that a surge this machine can make in a few
// seconds outruns the store the way 5,000 clients outrun a 100 ms one.
const surgePolicies = `timeout: 50ms
policies:
  - name: tenant
    match: "tenant"
    limit: 100
    rate: 50
    period: 1s
    on_store_error: open
`

// A surge of clients on one tenant over its limit, with every node up and
// on_store_error: open, admits no more than the tenant's budget (limit +
// rate × time) plus this instance's local share: the queue's overload is
// decided by on_overload, local for an open policy, and the breaker of a
// node that keeps answering stays closed, so nothing is admitted blind.
func TestSurgeKeepsLimiting(t *testing.T) {
	t.Parallel()
	requireRedisServer(t)
	bench := requireTool(t, "redis-benchmark")
	c := redistest.NewCluster(t, localredis.Config{})
	p, admin := startWithAdmin(t, "--cluster", strings.Join(c.Addrs(), ","), "--config", writeConfig(t, surgePolicies))
	cl := p.client(t)
	ctx := context.Background()
	if r, err := take(ctx, cl, "tenant", 1); err != nil || r.DecidedBy != "store" {
		t.Fatalf("before the surge: %+v %v", r, err)
	}
	host, port, _ := strings.Cut(p.Addr, ":")
	const clients, requests = 3000, 100000
	start := time.Now()
	out, err := exec.CommandContext(t.Context(), bench, "-h", host, "-p", port, "-c", fmt.Sprint(clients), "-n", fmt.Sprint(requests),
		"-q", "RL.TAKE", "tenant", "1").CombinedOutput()
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	info := func(field string) int64 {
		n, err := infoCount(ctx, cl, "sluice", field)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	allowed, decisions := info("allowed"), info("decisions")
	by := map[string]int64{}
	for _, path := range []string{"store", "overload_local", "overload_open", "overload_closed", "fallback_open", "fallback_local", "fallback_closed"} {
		by[path] = info("decided_by_" + path)
	}
	// The take before the surge spent one token of the budget, and was
	// counted in allowed.
	budget := 100 + 50*elapsed.Seconds()
	share := 100 + 50*elapsed.Seconds() // local_share 1: the whole policy again, in this instance alone
	t.Logf("%d clients, %d requests in %v: %d decisions, %d admitted; budget %.0f + local share %.0f; decided by %v; redis-benchmark: %s",
		clients, requests, elapsed.Round(time.Millisecond), decisions, allowed, budget, share, by, strings.TrimSpace(string(out)))
	if decisions < requests {
		t.Errorf("%d decisions, want at least %d", decisions, requests)
	}
	nodes, _ := cl.Do(ctx, "INFO", "sluice").Text()
	for _, line := range strings.Split(nodes, "\n") {
		if strings.HasPrefix(line, "node_") {
			t.Log(strings.TrimSpace(line))
		}
	}
	if resp, err := http.Get("http://" + admin + "/metrics"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "sluice_store_errors_total") || strings.HasPrefix(line, "sluice_overload_total") {
				t.Log(line)
			}
		}
	}
	if float64(allowed) > budget+share+1 {
		t.Errorf("admitted %d during the surge, more than the budget %.0f plus the local share %.0f", allowed, budget, share)
	}
	if by["overload_open"] != 0 {
		t.Errorf("overload-open %d: the policy does not set on_overload: open", by["overload_open"])
	}
}
