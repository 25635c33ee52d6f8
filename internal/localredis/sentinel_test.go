package localredis_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

func TestSentinelConfigErrors(t *testing.T) {
	t.Parallel()
	for _, cfg := range []localredis.SentinelConfig{
		{Replicas: -2},
		{Sentinels: -1},
		{Sentinels: 3, Quorum: 4},
		{MasterName: "my master"},
		{MasterName: "a@b"},
		{DownAfter: -time.Second},
		{Password: "with space"},
	} {
		if g, err := localredis.StartSentinel(t.Context(), cfg); err == nil {
			_ = g.Stop()
			t.Errorf("localredis.StartSentinel(%+v) = nil error, want a config error", cfg)
		}
	}
}

// TestSentinel runs its steps in order on one group: a crash failover,
// then a manual failover to the other replica.
func TestSentinel(t *testing.T) {
	t.Parallel()
	began := time.Now()
	g := redistest.NewSentinel(t, localredis.SentinelConfig{Replicas: 2, Password: "data-pw", SentinelPassword: "sentinel-pw"})
	t.Logf("1 primary + 2 replicas + 3 sentinels ready in %v", time.Since(began))
	ctx := t.Context()
	if got, want := len(g.Nodes()), 3; got != want {
		t.Fatalf("%d data nodes, want %d", got, want)
	}
	if got := g.Flag(); !strings.HasPrefix(got, "mymaster@127.0.0.1:") || strings.Count(got, ",") != 2 {
		t.Errorf("Flag() = %q, want mymaster@ and three sentinel addresses", got)
	}
	old := g.Primary()
	if old != g.Nodes()[0] || len(g.Replicas()) != 2 {
		t.Fatalf("Primary() = %v, Replicas() = %v", old, g.Replicas())
	}
	for i, a := range g.PrimaryAddrs(ctx) {
		if a != old.Addr {
			t.Errorf("sentinel %d names %q as the primary, want %s", i, a, old.Addr)
		}
	}
	// Client carries each server's password: the sentinels' and the data
	// nodes' differ.
	for _, n := range append(g.Sentinels(), g.Nodes()...) {
		if err := n.Client().Ping(ctx).Err(); err != nil {
			t.Errorf("PING %s with its password: %v", n.Addr, err)
		}
	}
	if err := old.Client().Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := old.Client().Do(ctx, "WAIT", 2, 5000).Err(); err != nil {
		t.Fatal(err)
	}

	killed := time.Now()
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	promoted, err := g.WaitNewPrimary(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("crash failover (down-after 1s): every sentinel names %s %v after SIGKILL", promoted.Addr, time.Since(killed))
	if promoted == old || g.Primary() != promoted {
		t.Fatalf("promoted %s, Primary() %s", promoted.Addr, g.Primary().Addr)
	}
	if got, err := promoted.Client().Get(ctx, "k").Result(); err != nil || got != "before" {
		t.Errorf("GET k on the promoted replica = %q, %v; want the replicated value", got, err)
	}

	manual := time.Now()
	if err := g.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	back, err := g.WaitNewPrimary(ctx, promoted)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SENTINEL FAILOVER: every sentinel names %s %v after the first try", back.Addr, time.Since(manual))
	if back == old || back == promoted {
		t.Errorf("manual failover promoted %s, want the third node", back.Addr)
	}
	if got, err := back.Client().Get(ctx, "k").Result(); err != nil || got != "before" {
		t.Errorf("GET k on the second promoted replica = %q, %v; want the replicated value", got, err)
	}
}
