//go:build linux

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/cluster"
)

// nsPrefix names every network namespace this file creates:
// sluice-t-<pid of the test binary>-<random>. A namespace whose pid is gone
// is a leftover of a crashed run and is removed at the start.
const nsPrefix = "sluice-t-"

// nsCluster is a Redis Cluster of three primaries (no replicas) inside its
// own network namespace. Each node has its own veth pair to the root
// namespace (root end 10.77.N.4i+1/30, namespace end 10.77.N.4i+2/30) and
// listens on its namespace-end address, so the link to one node can be cut
// while the test and sluice, in the root namespace, keep talking to the
// others. The nodes reach each other inside the namespace.
type nsCluster struct {
	ns    string
	nodes []*nsNode
}

type nsNode struct {
	Addr  string // "10.77.N.x:6379"
	inner string // veth end inside the namespace
	pid   int
	done  chan struct{}
}

// requireNetAdmin skips (or, in CI, fails) unless the test can create
// network namespaces: root and iproute2's ip.
func requireNetAdmin(t *testing.T) string {
	t.Helper()
	ip, err := exec.LookPath("ip")
	switch {
	case err != nil:
		err = errors.New("ip (iproute2) not found on PATH")
	case os.Geteuid() != 0:
		err = errors.New("network namespaces need root")
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return ip
}

func sh(t testing.TB, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// removeStaleNamespaces deletes the namespaces of earlier runs whose test
// binary is gone, after killing the servers left in them. Namespaces of
// runs still alive are left alone.
func removeStaleNamespaces(t testing.TB, ip string) {
	out, err := exec.Command(ip, "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], nsPrefix) {
			continue
		}
		ns := f[0]
		owner, _, _ := strings.Cut(strings.TrimPrefix(ns, nsPrefix), "-")
		if pid, err := strconv.Atoi(owner); err == nil && syscall.Kill(pid, 0) == nil {
			continue
		}
		pids, _ := exec.Command(ip, "netns", "pids", ns).Output()
		for _, p := range strings.Fields(string(pids)) {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if out, err := exec.Command(ip, "netns", "del", ns).CombinedOutput(); err != nil {
			t.Logf("removing leftover %s: %v %s", ns, err, out)
		} else {
			t.Logf("removed leftover namespace %s", ns)
		}
	}
}

// freeSubnet picks N for 10.77.N.0/24 not used by any root-namespace address.
func freeSubnet(t testing.TB, ip string) int {
	used := sh(t, ip, "-o", "-4", "addr", "show")
	var b [1]byte
	for range 256 {
		_, _ = rand.Read(b[:])
		if !strings.Contains(used, fmt.Sprintf(" 10.77.%d.", b[0])) {
			return int(b[0])
		}
	}
	t.Fatal("no free 10.77.N.0/24 subnet")
	return 0
}

// newNSCluster builds the namespace, the links and the cluster; everything
// is removed at cleanup, whether the test passed or not.
func newNSCluster(t *testing.T, nodeTimeout time.Duration) *nsCluster {
	t.Helper()
	ip := requireNetAdmin(t)
	server := requireTool(t, "redis-server")
	cli := requireTool(t, "redis-cli")
	removeStaleNamespaces(t, ip)

	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	tag := hex.EncodeToString(rnd[:])
	c := &nsCluster{ns: fmt.Sprintf("%s%d-%s", nsPrefix, os.Getpid(), tag)}
	sh(t, ip, "netns", "add", c.ns)
	t.Cleanup(func() {
		for _, n := range c.nodes {
			if n.pid > 0 {
				_ = syscall.Kill(n.pid, syscall.SIGKILL)
				select {
				case <-n.done:
				case <-time.After(5 * time.Second):
					t.Errorf("redis-server %d in %s did not exit", n.pid, c.ns)
				}
			}
		}
		// Deleting the namespace deletes the veth ends in it and, with them,
		// their peers in the root namespace.
		if out, err := exec.Command(ip, "netns", "del", c.ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v %s", c.ns, err, out)
		}
	})
	sh(t, ip, "-n", c.ns, "link", "set", "lo", "up")

	subnet := freeSubnet(t, ip)
	dir := t.TempDir()
	for i := range 3 {
		outer, inner := fmt.Sprintf("slt%s%d", tag, i), fmt.Sprintf("sln%s%d", tag, i)
		hostIP := fmt.Sprintf("10.77.%d.%d", subnet, 4*i+1)
		nodeIP := fmt.Sprintf("10.77.%d.%d", subnet, 4*i+2)
		// Created with its peer already in the namespace: no half-made pair
		// is ever left in the root namespace.
		sh(t, ip, "link", "add", outer, "type", "veth", "peer", "name", inner, "netns", c.ns)
		sh(t, ip, "addr", "add", hostIP+"/30", "dev", outer)
		sh(t, ip, "link", "set", outer, "up")
		sh(t, ip, "-n", c.ns, "addr", "add", nodeIP+"/30", "dev", inner)
		sh(t, ip, "-n", c.ns, "link", "set", inner, "up")

		nd := filepath.Join(dir, fmt.Sprintf("node-%d", i))
		if err := os.MkdirAll(nd, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(nd, "redis.out"))
		if err != nil {
			t.Fatal(err)
		}
		// ip netns exec execs redis-server in place: the pid is the server's.
		cmd := exec.Command(ip, "netns", "exec", c.ns, server,
			"--port", "6379", "--bind", nodeIP, "--protected-mode", "no",
			"--dir", nd, "--save", "", "--appendonly", "no", "--daemonize", "no",
			"--logfile", filepath.Join(nd, "redis.log"),
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			// Inside the namespace every node address is local, so a bus
			// connection to node B leaves from B's own address; without an
			// announced address the nodes would learn wrong ones.
			"--cluster-announce-ip", nodeIP,
			"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10))
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		err = cmd.Start()
		out.Close()
		if err != nil {
			t.Fatal(err)
		}
		n := &nsNode{Addr: nodeIP + ":6379", inner: inner, pid: cmd.Process.Pid, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(n.done) }()
		c.nodes = append(c.nodes, n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, n := range c.nodes {
		c.waitFor(t, ctx, n, func(rc *redis.Client) error { return rc.Ping(ctx).Err() })
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.nodes {
		args = append(args, n.Addr)
	}
	sh(t, cli, append(args, "--cluster-replicas", "0", "--cluster-yes")...)
	for _, n := range c.nodes {
		c.waitFor(t, ctx, n, func(rc *redis.Client) error {
			info, err := rc.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3\r\n") {
				return errors.New("cluster not ok yet")
			}
			return nil
		})
	}
	return c
}

// waitFor polls f on a client of n until it succeeds or ctx ends.
func (c *nsCluster) waitFor(t *testing.T, ctx context.Context, n *nsNode, f func(*redis.Client) error) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer rc.Close()
	for {
		err := f(rc)
		if err == nil {
			return
		}
		select {
		case <-n.done:
			t.Fatalf("redis-server %s in %s exited", n.Addr, c.ns)
		case <-ctx.Done():
			t.Fatalf("%s: %v", n.Addr, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *nsCluster) Addrs() []string {
	a := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		a[i] = n.Addr
	}
	return a
}

// primaryForKey asks the cluster which node serves key.
func (c *nsCluster) primaryForKey(t *testing.T, key string) *nsNode {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer cc.Close()
	ctx := context.Background()
	slot, err := cc.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slots {
		if int64(s.Start) <= slot && slot <= int64(s.End) {
			for _, n := range c.nodes {
				if n.Addr == s.Nodes[0].Addr {
					return n
				}
			}
		}
	}
	t.Fatalf("no node serves slot %d of %q", slot, key)
	return nil
}

// setLink brings the namespace end of n's veth down or up. Down, the root
// end loses its carrier but keeps its address and route: what sluice sends
// to n is dropped without a reset or an ICMP error, so its sockets stay
// open and no reply comes, as behind a dead switch port.
func (c *nsCluster) setLink(t testing.TB, n *nsNode, up bool) {
	t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	sh(t, "ip", "-n", c.ns, "link", "set", n.inner, state)
}

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
	c := newNSCluster(t, 30*time.Second)
	s := startSluice(t, "--config", writeConfig(t, partitionPolicies), "--cluster", strings.Join(c.Addrs(), ","))
	cl := s.client(t)
	ctx := context.Background()
	keys := map[string]string{"open": "open:{acme}", "closed": "closed:{acme}", "local": "local:{acme}"}
	for _, k := range keys {
		if r, err := take(ctx, cl, k, 1); err != nil || r.DecidedBy != "store" {
			t.Fatalf("before the cut %s: %+v %v", k, r, err)
		}
	}
	owner := c.primaryForKey(t, cluster.Key(keys["open"]))
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

	c.setLink(t, owner, false)
	cut := time.Now()
	restored := false
	t.Cleanup(func() {
		if !restored {
			c.setLink(t, owner, true)
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

	c.setLink(t, owner, true)
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
