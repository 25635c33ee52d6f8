package localredis_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// TestFaults runs the fault helpers, in order, on one 3+3 cluster on
// loopback and on one in a network namespace: each works the same on
// both. Each step leaves the cluster healthy for the next.
func TestFaults(t *testing.T) {
	t.Parallel()
	for _, netns := range []bool{false, true} {
		name := "loopback"
		if netns {
			name = "netns"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := localredis.Config{NodeTimeout: time.Second}
			var c *localredis.Cluster
			if netns {
				c = newNetnsCluster(t, cfg)
			} else {
				c = redistest.NewCluster(t, cfg)
			}
			t.Run("move slot errors", func(t *testing.T) { testMoveSlotErrors(t, c) })
			t.Run("move slot under writes", func(t *testing.T) { testMoveSlot(t, c) })
			t.Run("pause alone keeps the writes", func(t *testing.T) { testKillAfterHold(t, c, false) })
			t.Run("hold replication loses the writes", func(t *testing.T) { testKillAfterHold(t, c, true) })
			t.Run("restart empty", func(t *testing.T) { testRestartEmpty(t, c) })
			t.Run("failover", func(t *testing.T) { testFailover(t, c) })
		})
	}
}

// testMoveSlot moves a slot holding 200 keys while 4 clients INCR them
// through a cluster client (which follows ASK and MOVED): first step by
// step, with writes between the steps (while MIGRATING, then with the keys
// on the target and the slot still the source's: ASK), then back in one
// MoveSlot. Every acknowledged INCR is in the counters after, every key
// is on the final owner, none elsewhere, and no command failed.
func testMoveSlot(t *testing.T, c *localredis.Cluster) {
	ctx := t.Context()
	const nkeys = 200
	key := func(i int) string { return fmt.Sprintf("{move}:%d", i) }
	slot := localredis.Slot(key(0))
	cc := c.ClusterClient()
	for i := range nkeys {
		if err := cc.Set(ctx, key(i), 0, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	src, err := c.PrimaryForKey(ctx, key(0))
	if err != nil {
		t.Fatal(err)
	}
	dst := otherPrimary(c, src)

	var acked [nkeys]atomic.Int64
	var failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	for w := range 4 {
		wg.Go(func() {
			for i := w; ; i += 4 {
				select {
				case <-stop:
					return
				default:
				}
				k := i % nkeys
				if err := cc.Incr(ctx, key(k)).Err(); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				acked[k].Add(1)
			}
		})
	}
	total := func() (n int64) {
		for i := range acked {
			n += acked[i].Load()
		}
		return n
	}
	more := func(what string) {
		t.Helper()
		n := total()
		waitUntil(t, 10*time.Second, "no writes "+what, func() bool { return total() >= n+300 })
	}
	asking := func() int64 {
		t.Helper()
		info, err := dst.Client().Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(localredis.ParseInfo(info)["cmdstat_asking"], "calls="), ",")
		n, _ := strconv.ParseInt(calls, 10, 64)
		return n
	}

	more("before the move")
	began, askBefore := time.Now(), asking()
	m, err := c.BeginMove(ctx, slot, dst)
	if err != nil {
		t.Fatal(err)
	}
	more("while MIGRATING")
	if _, err := m.MoveKeys(ctx); err != nil {
		t.Fatal(err)
	}
	more("with the keys on the target, the slot the source's")
	asked := asking() - askBefore
	if err := m.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	stepwise := time.Since(began)
	more("after the move")
	if owner, err := c.PrimaryForKey(ctx, key(0)); err != nil || owner != dst {
		t.Errorf("PrimaryForKey after the move = %v, %v; want %s", owner, err, dst.Addr)
	}
	back := time.Now()
	if err := c.MoveSlot(ctx, slot, src); err != nil {
		t.Fatal(err)
	}
	whole := time.Since(back)
	more("after the move back")
	close(stop)
	wg.Wait()
	t.Logf("slot %d moved %s → %s step by step in %v (%d keys; %d ASKING on the target), back by MoveSlot in %v; %d INCRs acknowledged, %d failed",
		slot, src.Addr, dst.Addr, stepwise.Round(time.Millisecond), m.Moved, asked, whole.Round(time.Millisecond), total(), failed.Load())
	if n := failed.Load(); n != 0 {
		t.Errorf("%d INCRs failed during the moves; first: %v", n, firstErr.Load())
	}
	if m.Moved != nkeys || asked == 0 {
		t.Errorf("MoveKeys moved %d keys, want %d; %d ASKING reached the target, want some", m.Moved, nkeys, asked)
	}
	if owner, err := c.PrimaryForKey(ctx, key(0)); err != nil || owner != src {
		t.Errorf("PrimaryForKey after MoveSlot back = %v, %v; want %s", owner, err, src.Addr)
	}
	for _, tc := range []struct {
		n    *localredis.Node
		want int64
	}{{dst, 0}, {src, nkeys}} {
		if got, err := tc.n.Client().ClusterCountKeysInSlot(ctx, slot).Result(); err != nil || got != tc.want {
			t.Errorf("%s: CLUSTER COUNTKEYSINSLOT %d = %d, %v; want %d", tc.n.Addr, slot, got, err, tc.want)
		}
	}
	for i := range nkeys {
		got, err := src.Client().Get(ctx, key(i)).Int64()
		if want := acked[i].Load(); err != nil || got != want {
			t.Errorf("%s = %d, %v; want the %d INCRs acknowledged", key(i), got, err, want)
		}
	}
	if err := c.MoveSlot(ctx, slot, src); err != nil {
		t.Errorf("MoveSlot to the owner: %v, want nil (nothing to do)", err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
}

// testMoveSlotErrors: BeginMove refuses what it cannot move, and leaves
// nothing half-done.
func testMoveSlotErrors(t *testing.T, c *localredis.Cluster) {
	ctx := t.Context()
	p := c.Primaries()[0]
	r := c.ReplicasOf(p)[0]
	for _, tc := range []struct {
		name string
		slot int
		to   *localredis.Node
	}{
		{"slot below 0", -1, p},
		{"slot past the last", localredis.SlotCount, p},
		{"to a replica", 0, r},
		{"to a node of no cluster", 0, &localredis.Node{Addr: "127.0.0.1:1"}},
	} {
		if _, err := c.BeginMove(ctx, tc.slot, tc.to); err == nil {
			t.Errorf("%s: BeginMove(%d, %s) = nil error", tc.name, tc.slot, tc.to.Addr)
		}
	}
	// Nothing was left half-done: the cluster is as healthy as before.
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
}

// testKillAfterHold writes a key on a primary, writes it again with the
// replica held back (hold: HoldReplication; else the replica only
// SIGSTOPped), kills the primary, lets the replica go and promotes it.
// With HoldReplication the promoted replica has the first value only: the
// loss is real. With the pause alone it has the second: the kernel had
// kept the stream for the stopped replica, which is why HoldReplication
// also closes the replica's connection.
func testKillAfterHold(t *testing.T, c *localredis.Cluster, hold bool) {
	ctx := t.Context()
	p := c.Primaries()[0]
	replica := c.ReplicasOf(p)[0]
	key := keyOwnedBy(t, c, p)
	if err := p.Client().Set(ctx, key, "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Client().Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v: the replica never had the first write", n, err)
	}
	var release func() error
	if hold {
		var err error
		if release, err = c.HoldReplication(ctx, p); err != nil {
			t.Fatal(err)
		}
	} else {
		if err := replica.Pause(); err != nil {
			t.Fatal(err)
		}
		release = replica.Resume
	}
	if err := p.Client().Set(ctx, key, "after", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// One more round trip: the primary has gone through its event loop
	// since the SET, so the stream is written wherever it goes.
	if err := p.Client().Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := release(); hold && err != nil {
		t.Errorf("second release: %v, want nil (idempotent)", err)
	}
	if err := c.Takeover(ctx, replica); err != nil {
		t.Fatal(err)
	}
	if owner, err := c.PrimaryForKey(ctx, key); err != nil || owner != replica {
		t.Errorf("PrimaryForKey after Takeover = %v, %v; want %s", owner, err, replica.Addr)
	}
	if !slices.Contains(c.Primaries(), replica) || slices.Contains(c.Primaries(), p) {
		t.Errorf("Primaries after Takeover = %s; want %s in, %s out", addrsOf(c.Primaries()), replica.Addr, p.Addr)
	}
	want := "after"
	if hold {
		want = "before"
	}
	got, err := replica.Client().Get(ctx, key).Result()
	if err != nil || got != want {
		t.Errorf("GET %s on the promoted replica = %q, %v; want %q", key, got, err, want)
	}
	t.Logf("hold %v: the primary answered SET %s after; killed; the promoted replica %s has %q", hold, key, replica.Addr, got)

	// The old primary comes back as a replica of the new one.
	if err := p.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.ReplicasOf(replica), p) {
		t.Errorf("restarted %s is not a replica of %s", p.Addr, replica.Addr)
	}
}

// TestFaultErrors, on a cluster with no replicas: HoldReplication and
// SetLink refuse what they cannot do, and RestartEmpty restarts a primary
// that has no replica all the same.
func TestFaultErrors(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{Replicas: -1})
	ctx := t.Context()
	p := c.Primaries()[0]
	if err := p.SetLink(false); err == nil {
		t.Error("SetLink on a loopback cluster: nil error")
	}
	if c.Netns() != "" || !p.LinkUp() {
		t.Errorf("Netns() = %q, LinkUp() = %v; want \"\", true", c.Netns(), p.LinkUp())
	}
	if _, err := c.HoldReplication(ctx, p); err == nil {
		t.Error("HoldReplication of a primary with no replica: nil error")
	}
	if _, err := c.HoldReplication(ctx, &localredis.Node{Addr: "127.0.0.1:1"}); err == nil {
		t.Error("HoldReplication of a node of no cluster: nil error")
	}
	if err := c.RestartEmpty(ctx, &localredis.Node{Addr: "127.0.0.1:1"}); err == nil {
		t.Error("RestartEmpty of a node of no cluster: nil error")
	}
	// A primary with no replica is restarted empty all the same.
	key := keyOwnedBy(t, c, p)
	if err := p.Client().Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartEmpty(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := p.Client().Get(ctx, key).Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET %s after RestartEmpty: %v, want nil reply", key, err)
	}
}

// testRestartEmpty: a key written before RestartEmpty is gone after, on
// the primary and on its replica, and the cluster is healthy with the
// same primaries and replicas.
func testRestartEmpty(t *testing.T, c *localredis.Cluster) {
	ctx := t.Context()
	primaries := c.Primaries()
	p := primaries[1]
	replicas := c.ReplicasOf(p)
	key := keyOwnedBy(t, c, p)
	other := keyOwnedBy(t, c, otherPrimary(c, p))
	for _, k := range []string{key, other} {
		if err := c.ClusterClient().Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	pid := p.Pid
	began := time.Now()
	if err := c.RestartEmpty(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Logf("RestartEmpty %s: %v", p.Addr, time.Since(began).Round(time.Millisecond))
	if p.Pid == pid {
		t.Errorf("pid %d unchanged: not restarted", pid)
	}
	if got := c.Primaries(); !slices.Equal(got, primaries) {
		t.Errorf("primaries after RestartEmpty %s, want %s", addrsOf(got), addrsOf(primaries))
	}
	if got := c.ReplicasOf(p); !slices.Equal(got, replicas) {
		t.Errorf("replicas of %s after RestartEmpty %s, want %s", p.Addr, addrsOf(got), addrsOf(replicas))
	}
	for _, n := range append([]*localredis.Node{p}, replicas...) {
		if got, err := n.Client().DBSize(ctx).Result(); err != nil || got != 0 {
			t.Errorf("%s: DBSIZE after RestartEmpty = %d, %v; want 0", n.Addr, got, err)
		}
	}
	if err := c.ClusterClient().Get(ctx, key).Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET %s after RestartEmpty: %v, want nil reply", key, err)
	}
	if got, err := c.ClusterClient().Get(ctx, other).Result(); err != nil || got != "v" {
		t.Errorf("GET %s on another primary = %q, %v; want it kept", other, got, err)
	}
}

// testFailover: a killed primary is replaced by its replica
// (WaitNewPrimary) and comes back as the replica of it.
func testFailover(t *testing.T, c *localredis.Cluster) {
	ctx := t.Context()
	p := c.Primaries()[2]
	replicas := c.ReplicasOf(p)
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	promoted, err := c.WaitNewPrimary(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(replicas, promoted) {
		t.Fatalf("WaitNewPrimary = %s, want one of %s", promoted.Addr, addrsOf(replicas))
	}
	if err := p.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.ReplicasOf(promoted), p) {
		t.Errorf("restarted %s is not a replica of %s", p.Addr, promoted.Addr)
	}
}
