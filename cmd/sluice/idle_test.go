package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// 10,000 idle connections to the sluice binary: it holds them all, its
// memory per connection is measured, and a normal client still gets
// replies; then they all go and sluice is back to one client.
func TestTenThousandIdleConnectionsToTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 10,000 sockets")
	}
	s := startSluice(t, "--max-clients", "10100") // 10,000 idle ones and ours
	c := s.client(t)
	ctx := context.Background()
	rss0 := rssKiB(t, s.cmd.Process.Pid)
	const n = 10_000
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	for range n {
		nc, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns)+1, err)
		}
		conns = append(conns, nc)
	}
	clients := func() int {
		info, err := c.Info(ctx, "clients").Result()
		if err != nil {
			return -1
		}
		m := regexp.MustCompile(`connected_clients:(\d+)`).FindStringSubmatch(info)
		if m == nil {
			return -1
		}
		k, _ := strconv.Atoi(m[1])
		return k
	}
	poll(t, "10,001 connected clients", func() bool { return clients() == n+1 })
	rss1 := rssKiB(t, s.cmd.Process.Pid)
	t.Logf("%d idle connections: sluice RSS %d → %d KiB, %.1f KiB per connection", n, rss0, rss1, float64(rss1-rss0)/n)
	if r, err := take(ctx, c, "busy", 1); err != nil || !r.Allowed {
		t.Fatalf("a normal client among 10,000 idle ones: %+v %v", r, err)
	}
	for _, nc := range conns {
		nc.Close()
	}
	conns = nil
	poll(t, "back to one client", func() bool { return clients() == 1 })
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
