package main

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

const regionConfig = `defaults:
  on_store_error: closed
policies:
  - name: checkout
    match: "checkout:*"
    limit: 20
    rate: 10
    period: 1s
    scope: global
    region_floor: 0.1
  - name: local
    match: "*"
    limit: 5
    rate: 1
    period: 1s
`

// TestRegionsEndToEnd: two sluice processes in region eu (a Redis Cluster)
// and one in region us (a single Redis) share one global budget kept in a
// home redis-server: redis-cli sees decided_by region, the three together
// admit at most the budget, RL.REGIONS shows both regions, INFO and
// /metrics count the allocation; a regional policy beside it is untouched;
// when us's own Redis stops, its on_store_error (closed) answers.
func TestRegionsEndToEnd(t *testing.T) {
	t.Parallel()
	cli := requireTool(t, "redis-cli")
	home := redistest.NewSingle(t)
	eu := redistest.NewCluster(t, localredis.Config{Primaries: 3, Replicas: -1})
	usNode := redistest.NewSingle(t)
	cfg := writeConfig(t, regionConfig)
	homeURL := "redis://" + home.Addr
	euArgs := []string{"--cluster", strings.Join(eu.Addrs(), ","), "--region", "eu", "--home-redis", homeURL, "--config", cfg}
	eu1 := startSluice(t, append(euArgs, "--admin", "127.0.0.1:0")...)
	eu2 := startSluice(t, euArgs...)
	us := startSluice(t, "--redis", "redis://"+usNode.Addr, "--region", "us", "--home-redis", homeURL, "--config", cfg)

	host, port := hostPort(t, eu1.Addr)
	out, err := exec.Command(cli, "-h", host, "-p", port, "RL.TAKE", "checkout:acme").CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "region") {
		t.Fatalf("redis-cli RL.TAKE checkout:acme: %v\n%s", err, out)
	}

	// Every instance hammers the one global key for 2 s.
	ctx := context.Background()
	start := time.Now()
	var mu sync.Mutex
	admitted, byRegion := 0, 0
	var wg sync.WaitGroup
	for _, p := range []*proc{eu1, eu2, us} {
		c := p.client(t)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; n < 2000 && time.Since(start) < 2*time.Second; n++ {
					r, err := take(ctx, c, "checkout:acme", 1)
					if err != nil {
						t.Errorf("RL.TAKE: %v", err)
						return
					}
					mu.Lock()
					if r.Allowed {
						admitted++
					}
					if r.DecidedBy == "region" {
						byRegion++
					}
					mu.Unlock()
					time.Sleep(2 * time.Millisecond)
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	// the budget, plus what each region's floor (limit 2, 1/s) may admit
	// before its first claim is answered, plus the redis-cli take
	bound := 20 + 10*elapsed + 2*(2+1*elapsed) + 1
	t.Logf("admitted %d in %.2fs across 3 instances in 2 regions (bound %.0f); %d decided_by region", admitted, elapsed, bound, byRegion)
	if float64(admitted) > bound {
		t.Errorf("admitted %d > %.0f: the regions together exceeded the global budget", admitted, bound)
	}
	if admitted < 20 {
		t.Errorf("admitted %d: less than the burst", admitted)
	}
	if byRegion == 0 {
		t.Error("no reply said decided_by region")
	}

	// RL.REGIONS on eu1 shows eu (self) and, once the boards were read, us.
	var regions []any
	poll(t, "RL.REGIONS lists eu and us", func() bool {
		regions, err = eu1.client(t).Do(ctx, "RL.REGIONS").Slice()
		return err == nil && len(regions) == 2
	})
	self, other := regions[0].([]any), regions[1].([]any)
	if self[1] != "eu" || self[3] != int64(1) || other[1] != "us" || other[3] != int64(0) {
		t.Errorf("RL.REGIONS = %v", regions)
	}

	info, err := eu1.client(t).Info(ctx).Result()
	if err != nil || !strings.Contains(info, "# Region") || !strings.Contains(info, "region:eu") || !strings.Contains(info, "decided_by_region:") {
		t.Errorf("INFO lacks the region section: %v\n%s", err, info)
	}
	m := adminAddrRE.FindStringSubmatch(eu1.Logs())
	if m == nil {
		t.Fatal("no admin address logged")
	}
	resp, err := http.Get("http://" + m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`sluice_region_tokens_claimed_total{region="eu"}`, `sluice_region_home_reachable{region="eu"} 1`, `decided_by="region"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// A regional policy is decided by the region's store as before.
	if r, err := take(ctx, us.client(t), "other", 1); err != nil || r.DecidedBy != "store" || r.Limit != 5 {
		t.Errorf("regional policy: %+v, %v", r, err)
	}
	// When us's own Redis stops answering, on_store_error decides (as
	// overload-closed while the node's breaker still waits for it, the
	// same policy: on_overload defaults to on_store_error).
	if err := usNode.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = usNode.Resume() }()
	r, err := take(ctx, us.client(t), "checkout:acme", 1)
	if err != nil || r.Allowed || (r.DecidedBy != "fallback-closed" && r.DecidedBy != "overload-closed") {
		t.Errorf("global policy with the regional store down: %+v, %v; want fallback-closed or overload-closed", r, err)
	}
}

// TestRegionFlags: the flags that need each other say so.
func TestRegionFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--region", "eu"}, "--region needs a home store"},
		{[]string{"--home-redis", "redis://127.0.0.1:1"}, "need --region NAME"},
		{[]string{"--region", "eu", "--home-redis", "redis://127.0.0.1:1", "--home-cluster", "127.0.0.1:2"}, "exclusive"},
	} {
		_, err := parseServeFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
