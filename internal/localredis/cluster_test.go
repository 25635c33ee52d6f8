package localredis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, cfg := range []localredis.Config{
		{Primaries: 2},
		{Replicas: -2},
		{NodeTimeout: -time.Second},
		{Port: 60000},
		{Netns: true, Detach: true},
		{Netns: true, Primaries: 33}, // 66 nodes, one /30 each: more than a /24 holds
	} {
		if _, err := localredis.Start(t.Context(), cfg); err == nil {
			t.Errorf("localredis.Start(%+v) = nil error, want a config error", cfg)
		}
	}
	if _, err := localredis.Up(t.Context(), localredis.Config{}); err == nil {
		t.Error("localredis.Up without Dir: nil error")
	}
}

// TestCluster runs its steps in order on one cluster: each step leaves the
// cluster healthy for the next, and starting a cluster is the slow part.
func TestCluster(t *testing.T) {
	t.Parallel()
	began := time.Now()
	c := redistest.NewCluster(t, localredis.Config{NodeTimeout: time.Second})
	t.Logf("3+3 cluster ready in %v", time.Since(began))
	ctx := t.Context()

	primaries := c.Primaries()
	if len(primaries) != 3 || len(c.Nodes()) != 6 || len(c.Addrs()) != 3 {
		t.Fatalf("got %d primaries, %d nodes, %d addrs; want 3, 6, 3", len(primaries), len(c.Nodes()), len(c.Addrs()))
	}
	for _, p := range primaries {
		if got := len(c.ReplicasOf(p)); got != 1 {
			t.Errorf("%s has %d replicas, want 1", p.Addr, got)
		}
	}

	t.Run("slots", func(t *testing.T) {
		for _, n := range c.Nodes() {
			info, err := n.Client().ClusterInfo(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := localredis.ParseInfo(info)["cluster_slots_assigned"]; got != "16384" {
				t.Errorf("%s: cluster_slots_assigned:%s", n.Addr, got)
			}
		}
		shards, err := localredis.Shards(ctx, c.Nodes()[0].Client())
		if err != nil {
			t.Fatal(err)
		}
		// Shards: one per primary, the primary first, then its replica,
		// the slots all covered once.
		if len(shards) != len(primaries) {
			t.Errorf("Shards: %d shards, want %d", len(shards), len(primaries))
		}
		covered := 0
		for _, sh := range shards {
			i := slices.IndexFunc(primaries, func(n *localredis.Node) bool { return n.Addr == sh.Primary })
			if i < 0 {
				t.Errorf("Shards: primary %s is not a primary of the cluster", sh.Primary)
				continue
			}
			p := primaries[i]
			if rs := c.ReplicasOf(p); len(rs) != 1 || !slices.Equal(sh.Nodes, []string{p.Addr, rs[0].Addr}) {
				t.Errorf("Shards: nodes %v of %s, want the primary then its replica", sh.Nodes, p.Addr)
			}
			for _, r := range sh.Slots {
				covered += int(r.End - r.Start + 1)
			}
		}
		if covered != 16384 {
			t.Errorf("Shards: %d slots covered, want 16384", covered)
		}
		for i := range 50 {
			key := fmt.Sprintf("key:%d", i)
			if i%5 == 0 {
				key = fmt.Sprintf("{tenant%d}:login", i)
			}
			want, err := c.Nodes()[0].Client().ClusterKeySlot(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := localredis.Slot(key); int64(got) != want {
				t.Errorf("localredis.Slot(%q) = %d, CLUSTER KEYSLOT says %d", key, got, want)
			}
			owner, err := c.PrimaryForKey(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(shards, func(sh localredis.Shard) bool { return sh.Has(int(want)) })
			if i < 0 || shards[i].Primary != owner.Addr {
				t.Errorf("PrimaryForKey(%q) = %s, CLUSTER SHARDS disagrees", key, owner.Addr)
			}
			if err := owner.Client().Set(ctx, key, "v", time.Minute).Err(); err != nil {
				t.Errorf("SET %q on its owner %s: %v", key, owner.Addr, err)
			}
		}
	})

	t.Run("flush", func(t *testing.T) {
		if err := c.ClusterClient().Set(ctx, "flushme", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.FlushAll(ctx); err != nil {
			t.Fatal(err)
		}
		for _, p := range c.Primaries() {
			if n, err := p.Client().DBSize(ctx).Result(); err != nil || n != 0 {
				t.Errorf("%s: DBSIZE after FlushAll = %d, %v; want 0", p.Addr, n, err)
			}
		}

		var sha string
		for _, n := range c.Nodes() {
			var err error
			if sha, err = n.Client().ScriptLoad(ctx, "return 1").Result(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.ScriptFlushAll(ctx); err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Nodes() {
			exists, err := n.Client().ScriptExists(ctx, sha).Result()
			if err != nil || exists[0] {
				t.Errorf("%s: SCRIPT EXISTS after flush = %v, %v", n.Addr, exists, err)
			}
		}
	})

	t.Run("pause", func(t *testing.T) {
		r := c.ReplicasOf(c.Primaries()[0])[0]
		if err := r.Pause(); err != nil {
			t.Fatal(err)
		}
		if !r.Paused() {
			t.Error("Paused() = false after Pause")
		}
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := r.Client().Ping(pctx).Err()
		cancel()
		if err == nil {
			t.Error("PING answered by a paused node")
		}
		if err := r.Resume(); err != nil {
			t.Fatal(err)
		}
		if err := r.Client().Ping(ctx).Err(); err != nil {
			t.Errorf("PING after Resume: %v", err)
		}
		if err := c.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("failover and restart", func(t *testing.T) {
		old := c.Primaries()[0]
		replicas := c.ReplicasOf(old)
		key := keyOwnedBy(t, c, old)
		sha, err := old.Client().ScriptLoad(ctx, "return 2").Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ClusterClient().Set(ctx, key, "before", 0).Err(); err != nil {
			t.Fatal(err)
		}

		killed := time.Now()
		if err := old.Kill(); err != nil {
			t.Fatal(err)
		}
		if old.Running() {
			t.Fatal("Running() = true after Kill")
		}
		promoted, err := c.WaitNewPrimary(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("failover with node timeout 1s: %v from SIGKILL to healthy", time.Since(killed))
		if !slices.Contains(replicas, promoted) {
			t.Fatalf("WaitNewPrimary = %s, want one of the replicas %v", promoted.Addr, addrsOf(replicas))
		}
		if owner, err := c.PrimaryForKey(ctx, key); err != nil || owner != promoted {
			t.Errorf("PrimaryForKey after failover = %v, %v; want %s", owner, err, promoted.Addr)
		}
		if got, err := promoted.Client().Get(ctx, key).Result(); err != nil || got != "before" {
			t.Errorf("GET on the promoted replica = %q, %v; want the replicated value", got, err)
		}

		restarted := time.Now()
		if err := old.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("restarted node rejoined and synced in %v", time.Since(restarted))
		if !slices.Contains(c.ReplicasOf(promoted), old) {
			t.Errorf("restarted %s is not a replica of %s", old.Addr, promoted.Addr)
		}
		exists, err := old.Client().ScriptExists(ctx, sha).Result()
		if err != nil || exists[0] {
			t.Errorf("restarted node still has the script: %v, %v", exists, err)
		}
	})
}

func keyOwnedBy(t *testing.T, c *localredis.Cluster, n *localredis.Node) string {
	t.Helper()
	for i := range 1000 {
		key := fmt.Sprintf("probe:%d", i)
		owner, err := c.PrimaryForKey(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if owner == n {
			return key
		}
	}
	t.Fatalf("no key of 1000 lands on %s", n.Addr)
	return ""
}

func addrsOf(nodes []*localredis.Node) string {
	var s []string
	for _, n := range nodes {
		s = append(s, n.Addr)
	}
	return strings.Join(s, ",")
}

func TestFixedPortInUse(t *testing.T) {
	t.Parallel()
	redistest.RequireRedis(t, "", "")
	ports, err := localredis.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	l, err := localredis.Listen(ports[0] + localredis.BusPortOffset)
	if err != nil {
		t.Skipf("port taken meanwhile: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	_, err = localredis.Start(t.Context(), localredis.Config{Port: ports[0]})
	if !errors.Is(err, localredis.ErrPortInUse) {
		t.Errorf("localredis.Start on a taken bus port: %v, want ErrPortInUse", err)
	}
}

func otherPrimary(c *localredis.Cluster, n *localredis.Node) *localredis.Node {
	for _, p := range c.Primaries() {
		if p != n {
			return p
		}
	}
	return nil
}

// waitUntil polls cond until it holds, failing the test after d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal(what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
