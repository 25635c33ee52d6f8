package client_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The servers the tests talk to, started as processes: sluice built from
// this repository's ../cmd/sluice, and redis-server from PATH. Each is
// stopped by its pid when its test (or TestMain) ends.

var (
	sluiceBinary string // built by TestMain
	policyFile   string // examplePolicies, written by TestMain
)

// buildSluice builds ../cmd/sluice into dir. It runs go inside the
// server's module (cmd.Dir), which this module does not require.
func buildSluice(dir string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the examples run a sluice built from ../cmd/sluice, and that needs go on PATH: %w", err)
	}
	bin := filepath.Join(dir, "sluice")
	build := exec.Command(goBin, "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "cmd", "sluice")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ../cmd/sluice (the client's tests need the repository's checkout): %v\n%s", err, out)
	}
	return bin, nil
}

// proc is one server process, its stdout and stderr kept in logs.
type proc struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{} // closed when the process has exited

	mu   sync.Mutex
	logs strings.Builder
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.Write(b)
}

func (p *proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// start runs bin with args, its environment without SLUICE_* (so that
// only args configure it).
func start(bin string, args ...string) (*proc, error) {
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p, p
	p.cmd.SysProcAttr = childAttr()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitFor polls ready until it holds, the process exits or 30s pass.
func (p *proc) waitFor(what string, ready func() bool) error {
	deadline := time.Now().Add(30 * time.Second)
	for !ready() {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before %s: %v\n%s", filepath.Base(p.cmd.Path), what, p.cmd.ProcessState, p.Logs())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return fmt.Errorf("%s: not %s after 30s\n%s", filepath.Base(p.cmd.Path), what, p.Logs())
		}
	}
	return nil
}

// stop ends the process by its pid: SIGTERM, SIGKILL after 10s.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

var listenRE = regexp.MustCompile(`msg="sluice listening" addr=(\S+)`)

// startSluice runs `sluice serve` on a free port with the examples'
// policies and args, and returns once it listens. The caller stops it.
func startSluice(args ...string) (*proc, error) {
	full := append([]string{"serve", "--listen", "127.0.0.1:0", "--admin", "", "--config", policyFile}, args...)
	p, err := start(sluiceBinary, full...)
	if err != nil {
		return nil, err
	}
	err = p.waitFor("listening", func() bool {
		if m := listenRE.FindStringSubmatch(p.Logs()); m != nil {
			p.addr = m[1]
		}
		return p.addr != ""
	})
	return p, err
}

// startCluster starts six redis-server nodes in cluster mode and joins
// them into a 3+3 Redis Cluster: three primaries holding a third of the
// slots each, one replica each. It returns their addresses once every
// node says the cluster is ok and every replica is in sync.
func startCluster(t *testing.T) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs redis-server: run without -short")
	}
	serverBin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("needs redis-server on PATH: %v", err)
	}
	dir := t.TempDir()
	ports := freePortPairs(t, 6)
	nodes := make([]*redis.Client, len(ports))
	for i, port := range ports {
		nodes[i] = startNode(t, serverBin, filepath.Join(dir, strconv.Itoa(port)), port)
	}
	ctx := t.Context()
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		if ids[i], err = n.Do(ctx, "CLUSTER", "MYID").Text(); err != nil {
			t.Fatal(err)
		}
	}
	const primaries = 3
	for i := range primaries {
		args := []any{"CLUSTER", "ADDSLOTS"}
		for s := i * 16384 / primaries; s < (i+1)*16384/primaries; s++ {
			args = append(args, s)
		}
		mustDo(t, nodes[i], args...)
	}
	for _, n := range nodes[1:] {
		mustDo(t, n, "CLUSTER", "MEET", "127.0.0.1", ports[0])
	}
	waitCluster(t, "every node knowing every other", nodes, func(n *redis.Client) error {
		return knowsAll(ctx, n, ids)
	})
	for i, n := range nodes[primaries:] {
		mustDo(t, n, "CLUSTER", "REPLICATE", ids[i])
	}
	waitCluster(t, "cluster_state:ok and every replica in sync", nodes, func(n *redis.Client) error {
		return clusterReady(ctx, n)
	})
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Options().Addr
	}
	return addrs
}

// startNode runs one cluster-mode redis-server on port, its files in dir,
// and returns a client of it once it answers PING.
func startNode(t *testing.T, serverBin, dir string, port int) *redis.Client {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := start(serverBin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--save", "", "--appendonly", "no", "--daemonize", "no")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	if err := p.waitFor("answering PING", func() bool { return c.Ping(t.Context()).Err() == nil }); err != nil {
		t.Fatal(err)
	}
	return c
}

func mustDo(t *testing.T, c *redis.Client, args ...any) {
	t.Helper()
	if err := c.Do(t.Context(), args...).Err(); err != nil {
		t.Fatalf("%s: %v %v: %v", c.Options().Addr, args[0], args[1], err)
	}
}

// waitCluster polls check on every node until all pass, for at most 30s.
func waitCluster(t *testing.T, what string, nodes []*redis.Client, check func(*redis.Client) error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var errs []error
		for _, n := range nodes {
			if err := check(n); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", n.Options().Addr, err))
			}
		}
		if len(errs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 30s: %v", what, errors.Join(errs...))
		}
		time.Sleep(20 * time.Millisecond) // polling, not waiting for an event
	}
}

// knowsAll reports whether n's CLUSTER NODES lists every id out of handshake.
func knowsAll(ctx context.Context, n *redis.Client, ids []string) error {
	text, err := n.ClusterNodes(ctx).Result()
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for line := range strings.Lines(text) {
		if f := strings.Fields(line); len(f) > 2 && !strings.Contains(f[2], "handshake") {
			known[f[0]] = true
		}
	}
	for _, id := range ids {
		if !known[id] {
			return fmt.Errorf("does not know %s yet", id)
		}
	}
	return nil
}

// clusterReady reports whether n sees the cluster ok and, when n is a
// replica, has its primary's data.
func clusterReady(ctx context.Context, n *redis.Client) error {
	info, err := n.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return errors.New("cluster_state is not ok")
	}
	repl, err := n.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
		return errors.New("replica not in sync")
	}
	return nil
}

// freePortPairs returns n ports p such that p and its cluster bus port
// p+10000 are both free now. They are drawn below Linux's ephemeral range
// (from 32768), so no outgoing connection is given one meanwhile; every
// port is held until all are chosen, so the pairs are distinct.
func freePortPairs(t *testing.T, n int) []int {
	t.Helper()
	var (
		ports []int
		held  []net.Listener
	)
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			t.Fatalf("found %d of %d free port pairs", len(ports), n)
		}
		p := 12000 + rand.IntN(10000)
		a, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+10000)))
		if err != nil {
			a.Close()
			continue
		}
		held = append(held, a, b)
		ports = append(ports, p)
	}
	return ports
}
