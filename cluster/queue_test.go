package cluster

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// spareNode is a cluster-enabled redis-server outside any cluster, on an
// address no client has seen: a node that joins a cluster and leaves it, as
// a replaced machine or a rescheduled pod does with a new address.
type spareNode struct {
	addr   string
	port   int
	id     string
	client *redis.Client
	cmd    *exec.Cmd
}

// freePortPair returns a port p, free with p+10000 (its cluster bus).
func freePortPair(t *testing.T) int {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		if p+10000 > 65535 {
			ln.Close()
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		ln.Close()
		if err == nil {
			bus.Close()
			return p
		}
	}
	t.Fatal("no free port pair")
	return 0
}

func startSpareNode(t *testing.T, ctx context.Context) *spareNode {
	t.Helper()
	serverBin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for range 5 {
		n := &spareNode{port: freePortPair(t)}
		n.addr = "127.0.0.1:" + strconv.Itoa(n.port)
		n.cmd = exec.Command(serverBin, "--port", strconv.Itoa(n.port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "redis.log"),
			"--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("nodes-%d.conf", n.port),
			"--cluster-node-timeout", "1000", // a joining primary waits this long before it calls the cluster ok
			// Stay a primary when the last slot leaves, so that the move
			// back can be finished on it like any other.
			"--cluster-allow-replica-migration", "no")
		n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := n.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		n.client = redis.NewClient(&redis.Options{Addr: n.addr, MaxRetries: -1})
		exited := make(chan struct{})
		go func() { _ = n.cmd.Wait(); close(exited) }()
		t.Cleanup(func() { n.stop(); <-exited })
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if n.id, err = n.client.ClusterMyID(ctx).Result(); err == nil {
				return n
			}
			select {
			case <-exited: // lost the race for the port: try another
				deadline = time.Time{}
			case <-time.After(10 * time.Millisecond): // polling interval
			}
		}
		n.stop()
	}
	t.Fatal("no spare redis-server started")
	return nil
}

// stop kills the spare node's own process, by pid.
func (n *spareNode) stop() {
	_ = n.client.Close()
	if n.cmd.Process != nil {
		_ = n.cmd.Process.Kill()
	}
}

// clusterMember is what the topology steps need of a node.
type clusterMember struct {
	addr, id string
	port     int
	client   *redis.Client
}

func memberOf(n *localredis.Node) clusterMember {
	return clusterMember{addr: n.Addr, id: n.ID, port: n.Port, client: n.Client()}
}

func (n *spareNode) member() clusterMember {
	return clusterMember{addr: n.addr, id: n.id, port: n.port, client: n.client}
}

// waitKnown polls until every node lists every other in CLUSTER NODES,
// past the handshake, and says the cluster is ok.
func waitKnown(t *testing.T, ctx context.Context, nodes []clusterMember) {
	t.Helper()
	waitUntil(t, 20*time.Second, "the nodes never all knew each other", func() bool {
		for _, n := range nodes {
			info, err := n.client.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
			text, err := n.client.ClusterNodes(ctx).Result()
			if err != nil {
				return false
			}
			for _, m := range nodes {
				i := strings.Index(text, m.id+" ")
				if i < 0 {
					return false
				}
				line, _, _ := strings.Cut(text[i:], "\n")
				if strings.Contains(line, "handshake") || strings.Contains(line, "noaddr") {
					return false
				}
			}
		}
		return true
	})
}

// moveSlot moves slot from src to dst as redis-cli --cluster reshard
// does, then polls until every node of all says dst owns it.
func moveSlot(t *testing.T, ctx context.Context, slot int, src, dst clusterMember, all []clusterMember) {
	t.Helper()
	do := func(n clusterMember, args ...any) {
		t.Helper()
		if err := n.client.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%s: %v: %v", n.addr, args, err)
		}
	}
	do(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.id)
	do(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst.id)
	for {
		keys, err := src.client.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		do(src, args...)
	}
	do(dst, "CLUSTER", "SETSLOT", slot, "NODE", dst.id)
	do(src, "CLUSTER", "SETSLOT", slot, "NODE", dst.id)
	for _, n := range all {
		if n.id != src.id && n.id != dst.id {
			do(n, "CLUSTER", "SETSLOT", slot, "NODE", dst.id)
		}
	}
	waitUntil(t, 20*time.Second, fmt.Sprintf("slot %d never owned by %s everywhere", slot, dst.addr), func() bool {
		for _, n := range all {
			shards, err := localredis.Shards(ctx, n.client)
			if err != nil {
				return false
			}
			owned := false
			for _, sh := range shards {
				if sh.Has(slot) && sh.Primary == dst.addr {
					owned = true
				}
			}
			if !owned {
				return false
			}
		}
		return true
	})
}

// The queues of nodes that left the cluster stop: nodes come and go on new
// addresses (a node joins, takes a slot, gives it back and is removed, five
// times), and the goroutine count comes back to where it was.
func TestQueuesOfDepartedNodesStop(t *testing.T) {
	// Not parallel: it counts the goroutines of the whole test binary.
	const pipelines = 8
	c := redistest.NewCluster(t, localredis.Config{Replicas: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := New(Config{Addrs: c.Addrs(), Timeout: 5 * time.Second, Pipelines: pipelines})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := &limit.Policy{Limit: 1_000_000, Rate: 1, Period: time.Hour}
	const key = "roaming"
	slot := Slot(Key(key))
	owner, err := c.PrimaryForKey(ctx, Key(key))
	if err != nil {
		t.Fatal(err)
	}
	var members []clusterMember
	for _, n := range c.Primaries() {
		members = append(members, memberOf(n))
	}
	take := func(what string) {
		t.Helper()
		// Until the store answers: right after a move a take may meet a
		// node that has not heard of it yet.
		waitUntil(t, 20*time.Second, what, func() bool {
			r := takeN(ctx, s, p, key)[0]
			return r.Err == nil && r.DecidedBy == limit.ByStore
		})
	}
	for i := 0; len(s.Stats()) < 3; i++ { // every primary's queue starts
		if r := takeN(ctx, s, p, "other:"+strconv.Itoa(i))[0]; r.Err != nil || i == 100 {
			t.Fatalf("%v; queues %v", r.Err, s.Stats())
		}
	}
	take("no answer before the first move")
	waitSettled(t)
	baseline := runtime.NumGoroutine()

	const cycles = 4
	counts := []int{baseline}
	// Started up front, so that the cycles wait for no start-up.
	spares := make([]*spareNode, cycles)
	for i := range spares {
		spares[i] = startSpareNode(t, ctx)
	}
	for i, spare := range spares {
		for _, m := range members { // from each, for a quick handshake
			if err := m.client.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(spare.port)).Err(); err != nil {
				t.Fatal(err)
			}
		}
		all := append(append([]clusterMember(nil), members...), spare.member())
		waitKnown(t, ctx, all)
		moveSlot(t, ctx, slot, memberOf(owner), spare.member(), all)
		take(fmt.Sprintf("cycle %d: no answer from the new node", i))
		if n, err := spare.client.Exists(ctx, Key(key)).Result(); err != nil || n != 1 {
			t.Fatalf("cycle %d: the key is not on the new node: %d %v", i, n, err)
		}
		moveSlot(t, ctx, slot, spare.member(), memberOf(owner), all)
		take(fmt.Sprintf("cycle %d: no answer after the move back", i))
		spare.stop()
		for _, m := range members {
			if err := m.client.ClusterForget(ctx, spare.id).Err(); err != nil {
				t.Fatalf("%s: CLUSTER FORGET: %v", m.addr, err)
			}
		}
		take(fmt.Sprintf("cycle %d: no answer after the node left", i))
		counts = append(counts, runtime.NumGoroutine())
	}
	// A departed node's queue stops at a sweep (at most sweepEvery later),
	// so poll. go-redis keeps its own client of a departed node, with one
	// goroutine, until its garbage collection a minute later: one per cycle
	// is allowed for that, plus a few for its slot-map reloads.
	allowed := baseline + cycles + 6
	deadline := time.Now().Add(20 * time.Second) // two sweeps at least
	now, workers := runtime.NumGoroutine(), queueWorkers()
	for (now > allowed || workers != 3*pipelines) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // polling interval
		now, workers = runtime.NumGoroutine(), queueWorkers()
	}
	t.Logf("goroutines before and after each of %d nodes joined and left: %v; at the end %d (allowed %d), "+
		"of them queue workers %d (%d pipelines × 3 primaries = %d)", cycles, counts, now, allowed, workers, pipelines, 3*pipelines)
	if now > allowed || workers != 3*pipelines {
		t.Errorf("%d goroutines at the end, %d more than before the first node came; %d queue workers, want %d: "+
			"queues of departed nodes are still running", now, now-baseline, workers, 3*pipelines)
	}
}

// queueWorkers counts the goroutines running nodeQueue.work.
func queueWorkers() int {
	buf := make([]byte, 4<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), ".(*nodeQueue).work(")
}

// waitSettled polls until the goroutine count holds still for 300ms.
func waitSettled(t *testing.T) {
	t.Helper()
	last, since := runtime.NumGoroutine(), time.Now()
	deadline := time.Now().Add(10 * time.Second)
	for time.Since(since) < 300*time.Millisecond && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // polling interval
		if n := runtime.NumGoroutine(); n != last {
			last, since = n, time.Now()
		}
	}
}
