package localredis_test

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// newNetnsCluster starts a cluster in a network namespace for the test,
// skipping it without root (failing it in CI).
func newNetnsCluster(t *testing.T, cfg localredis.Config) *localredis.Cluster {
	t.Helper()
	cfg.Netns = true
	return redistest.NewCluster(t, cfg)
}

// TestSetLink cuts a primary's link in a namespace cluster: a request on a
// connection opened before the cut gets no answer and no reset, a new
// connection gets no answer either, the other nodes answer, and the
// cluster does not fail the node over (its peers still reach it) however
// long past cluster-node-timeout the cut lasts. Healed, the old
// connection answers the request it sent during the cut.
func TestSetLink(t *testing.T) {
	t.Parallel()
	const nodeTimeout = time.Second
	c := newNetnsCluster(t, localredis.Config{NodeTimeout: nodeTimeout})
	ctx := t.Context()
	p := c.Primaries()[0]
	peer := otherPrimary(c, p)
	for _, n := range c.Nodes() {
		if !strings.HasPrefix(n.Addr, "10.79.") || !n.LinkUp() {
			t.Errorf("node %s: LinkUp %v; want a 10.79.N.x address, link up", n.Addr, n.LinkUp())
		}
	}

	conn, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	ping := func() (string, error) {
		if _, err := conn.Write([]byte("PING\r\n")); err != nil {
			return "", err
		}
		_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		return r.ReadString('\n')
	}
	if got, err := ping(); err != nil || got != "+PONG\r\n" {
		t.Fatalf("PING before the cut = %q, %v", got, err)
	}

	if err := p.SetLink(false); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	healed := false
	t.Cleanup(func() {
		if !healed {
			_ = p.SetLink(true)
		}
	})
	if p.LinkUp() {
		t.Error("LinkUp() = true after SetLink(false)")
	}
	got, err := ping()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("PING on an open connection during the cut = %q, %v; want a timeout (no reply, no reset)", got, err)
	}
	if d, err := net.DialTimeout("tcp", p.Addr, 300*time.Millisecond); err == nil {
		d.Close()
		t.Error("a new connection to the cut node was accepted")
	} else if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("dial during the cut: %v; want a timeout, not a refusal", err)
	}
	if err := peer.Client().Ping(ctx).Err(); err != nil {
		t.Errorf("PING %s (not cut): %v", peer.Addr, err)
	}
	pid := p.Pid
	if err := p.Restart(ctx); err == nil || p.Pid != pid || !p.Running() {
		t.Errorf("Restart during the cut: %v, pid %d → %d, running %v; want an error and the server left alone", err, pid, p.Pid, p.Running())
	}
	// The peers hear from the cut node past cluster-node-timeout and do
	// not fail it: pong-recv of its line in a peer's CLUSTER NODES.
	waitUntil(t, 10*nodeTimeout, "no pong from the cut node past cluster-node-timeout", func() bool {
		pong, flags := pongFrom(t, peer, p)
		if strings.Contains(flags, "fail") {
			t.Fatalf("%s flags the cut node %s: %s", peer.Addr, p.Addr, flags)
		}
		return pong.After(cut.Add(nodeTimeout + 100*time.Millisecond))
	})
	if _, flags := pongFrom(t, peer, p); flags != "master" {
		t.Errorf("%s sees the cut %s as %q, want master", peer.Addr, p.Addr, flags)
	}

	if err := p.SetLink(true); err != nil {
		t.Fatal(err)
	}
	healed = true
	// The PING sent during the cut is answered on the same connection.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "+PONG\r\n" {
		t.Errorf("the reply to the PING sent during the cut = %q, %v; want +PONG on the same connection", got, err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
}

// pongFrom returns when peer last heard from n and n's flags, from
// peer's CLUSTER NODES.
func pongFrom(t *testing.T, peer, n *localredis.Node) (time.Time, string) {
	t.Helper()
	text, err := peer.Client().ClusterNodes(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[0] != n.ID {
			continue
		}
		ms, err := strconv.ParseInt(f[5], 10, 64)
		if err != nil {
			t.Fatalf("pong-recv %q in %q", f[5], line)
		}
		return time.UnixMilli(ms), f[2]
	}
	t.Fatalf("%s does not list %s", peer.Addr, n.Addr)
	return time.Time{}, ""
}

// TestNetnsLifecycle: Start deletes a leftover namespace of a dead
// process, Stop deletes the cluster's own namespace and its veths, and a
// namespace cannot go with Detach.
func TestNetnsLifecycle(t *testing.T) {
	t.Parallel()
	redistest.RequireRedis(t, "", "")
	redistest.RequireNetns(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	leftover := "localredis-" + strconv.Itoa(dead.Process.Pid) + "-dead00"
	if out, err := exec.Command("ip", "netns", "add", leftover).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v %s", leftover, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", leftover).Run() })

	c, err := localredis.Start(t.Context(), localredis.Config{Netns: true, Replicas: -1, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	name := c.Netns()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c.Stop()
		}
	})
	if !strings.HasPrefix(name, "localredis-"+strconv.Itoa(os.Getpid())+"-") {
		t.Errorf("Netns() = %q, want localredis-<our pid>-…", name)
	}
	if list := netnsList(t); strings.Contains(list, leftover) || !strings.Contains(list, name) {
		t.Errorf("ip netns list after Start:\n%s\nwant %s, not the leftover %s", list, name, leftover)
	}
	tag := name[strings.LastIndexByte(name, '-')+1:]
	if links := hostLinks(t, tag); links != 3 {
		t.Errorf("%d root-namespace veth ends of %s, want 3", links, name)
	}
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(netnsList(t), name) {
		t.Errorf("namespace %s still listed after Stop", name)
	}
	if links := hostLinks(t, tag); links != 0 {
		t.Errorf("%d root-namespace veth ends of %s left after Stop, want 0", links, name)
	}

	if _, err := localredis.Start(t.Context(), localredis.Config{Netns: true, Detach: true}); err == nil {
		t.Error("Start with Netns and Detach: nil error")
	}
}

func netnsList(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// hostLinks counts the root namespace's veth ends of the namespace with
// tag (named lrh<tag><i>).
func hostLinks(t *testing.T, tag string) int {
	t.Helper()
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, ": lrh"+tag) {
			n++
		}
	}
	return n
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
