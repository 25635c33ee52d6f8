package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// breakerState reads node addr's breaker from INFO sluice.
func breakerState(ctx context.Context, cl *redis.Client, addr string) string {
	info, err := cl.Do(ctx, "INFO", "sluice").Text()
	if err != nil {
		return "error: " + err.Error()
	}
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "node_"+addr+":breaker="); ok {
			state, _, _ := strings.Cut(rest, ",")
			return state
		}
	}
	return "absent"
}

// A real network partition: the link between sluice and the primary owning
// the keys is cut mid-traffic, with the cluster in another network
// namespace. Each policy answers as configured within the deadline, with no
// error replies; the node's breaker opens during the cut and closes after,
// and strict decisions resume once the link is back. The cut (about 1.5s)
// is far shorter than cluster-node-timeout (30s): no failover happens.
func TestNetworkPartition(t *testing.T) {
	t.Parallel()
	// The cluster in a network namespace, each node behind a veth pair of
	// its own: the link to one can be cut while sluice keeps talking to
	// the others.
	c := redistest.NewCluster(t, localredis.Config{Netns: true, Replicas: -1, NodeTimeout: 30 * time.Second})
	s := startSluice(t, "--config", writeConfig(t, partitionPolicies), "--cluster", strings.Join(c.Addrs(), ","))
	cl := s.client(t)
	ctx := context.Background()
	keys := map[string]string{"open": "open:{acme}", "closed": "closed:{acme}", "local": "local:{acme}"}
	for _, k := range keys {
		if r, err := take(ctx, cl, k, 1); err != nil || r.DecidedBy != "store" {
			t.Fatalf("before the cut %s: %+v %v", k, r, err)
		}
	}
	owner, err := c.PrimaryForKey(ctx, cluster.Key(keys["open"]))
	if err != nil {
		t.Fatal(err)
	}
	if got := breakerState(ctx, cl, owner.Addr); got != "closed" {
		t.Fatalf("breaker of %s before the cut: %q, want closed", owner.Addr, got)
	}

	// Background traffic on the owner's slot runs from before the cut until
	// the link is back, so requests are in flight when the link goes.
	stop := make(chan struct{})
	bg := &tally{}
	bgDone := make(chan struct{})
	go func() {
		hammer([]*redis.Client{cl}, 2, "open:{acme}:bg", 20*time.Second, stop, bg)
		close(bgDone)
	}()
	for bg.allowed.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}

	if err := owner.SetLink(false); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	restored := false
	t.Cleanup(func() {
		if !restored {
			_ = owner.SetLink(true)
		}
	})

	tallies := map[string]*tally{}
	var wg sync.WaitGroup
	for name, key := range keys {
		tl := &tally{}
		tallies[name] = tl
		wg.Go(func() { hammer([]*redis.Client{cl}, 4, key, 1500*time.Millisecond, nil, tl) })
	}
	sawOpen := false
	var openAfter time.Duration
	for time.Since(cut) < 1400*time.Millisecond {
		if breakerState(ctx, cl, owner.Addr) == "open" {
			sawOpen, openAfter = true, time.Since(cut)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()

	var slowest time.Duration
	for _, name := range []string{"open", "closed", "local"} {
		tl := tallies[name]
		total := tl.allowed.Load() + tl.rejected.Load()
		slow := time.Duration(tl.slowest.Load())
		slowest = max(slowest, slow)
		t.Logf("cut %s: %s; allowed fraction %.3f", name, tl, float64(tl.allowed.Load())/float64(max(1, total)))
		if tl.errors.Load() != 0 {
			t.Errorf("%s: error replies during the cut: %s", name, tl)
		}
		if slow > 50*time.Millisecond+200*time.Millisecond {
			t.Errorf("%s: slowest reply %v, want within the 50ms timeout plus 200ms", name, slow)
		}
	}
	t.Logf("slowest reply during the cut: %v", slowest)
	if tl := tallies["open"]; tl.rejected.Load() != 0 || tl.by["fallback-open"] == 0 {
		t.Errorf("open must admit everything: %s", tallies["open"])
	}
	if tl := tallies["closed"]; tl.allowed.Load() != 0 || tl.by["fallback-closed"] == 0 {
		t.Errorf("closed must reject everything: %s", tallies["closed"])
	}
	// local_share 0.5 of limit 40 and 1/h: at most 20 admitted here.
	if tl := tallies["local"]; tl.allowed.Load() > 20 || tl.allowed.Load() == 0 || tl.by["fallback-local"] == 0 {
		t.Errorf("local must admit at most its share (20): %s", tallies["local"])
	}
	if !sawOpen {
		t.Errorf("INFO sluice never showed breaker=open for %s during the cut", owner.Addr)
	} else {
		t.Logf("breaker of %s open %v after the cut", owner.Addr, openAfter.Round(time.Millisecond))
	}

	if err := owner.SetLink(true); err != nil {
		t.Fatal(err)
	}
	restored = true
	cutFor := time.Since(cut)
	back := time.Now()
	for _, key := range keys {
		waitStrict(t, cl, key, back, 15*time.Second)
	}
	strictAfter := time.Since(back)
	close(stop)
	<-bgDone
	t.Logf("background traffic through the cut: %s", bg)
	if bg.errors.Load() != 0 || time.Duration(bg.slowest.Load()) > 250*time.Millisecond {
		t.Errorf("background traffic: want no error replies and no reply slower than 250ms: %s", bg)
	}
	if got := breakerState(ctx, cl, owner.Addr); got != "closed" {
		t.Errorf("breaker of %s after the link came back: %q, want closed", owner.Addr, got)
	}
	t.Logf("link to %s cut for %v; strict decisions on all three policies %v after it came back",
		owner.Addr, cutFor.Round(time.Millisecond), strictAfter.Round(time.Millisecond))
}
