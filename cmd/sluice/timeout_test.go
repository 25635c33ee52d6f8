package main

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

const timeoutConfig = `
timeout: %s
policies:
  - name: all
    match: "*"
    limit: 1000000
    rate: 1
    period: 1h
    on_store_error: open
`

// A timeout raised by SIGHUP is the one the store waits for: with 50ms a
// node that stalls for 300ms (CLIENT PAUSE on the key's primary) is
// answered by on_store_error or on_overload; after a reload to 2s, by the store, ~300ms
// late. The connections to Redis must not keep a cap of their own from
// the timeout at start.
func TestSIGHUPRaisesStoreTimeout(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{Replicas: -1})
	path := writeConfig(t, strings.Replace(timeoutConfig, "%s", "50ms", 1))
	s := startSluice(t, "--config", path, "--cluster", strings.Join(c.Addrs(), ","))
	cl := s.client(t)
	ctx := t.Context()
	const key = "stall"
	owner, err := c.PrimaryForKey(ctx, cluster.Key(key))
	if err != nil {
		t.Fatal(err)
	}
	waitStrict(t, cl, key, time.Now(), 10*time.Second)

	// stalled takes key while its primary holds every client for 300ms.
	stalled := func() (reply, time.Duration) {
		t.Helper()
		if err := owner.Client().Do(ctx, "CLIENT", "PAUSE", 300, "ALL").Err(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		r, err := take(context.Background(), cl, key, 1)
		if err != nil {
			t.Fatalf("take during the pause: %v", err)
		}
		return r, time.Since(start)
	}

	before, took := stalled()
	t.Logf("timeout 50ms, primary paused for 300ms: decided by %s in %v", before.DecidedBy, took.Round(time.Millisecond))
	// A node that answered within the breaker's cool-down is taken for
	// slow, not dead: its first timeouts are overload (on_overload: local
	// for an open policy), later ones fallback-open.
	if before.DecidedBy != "fallback-open" && before.DecidedBy != "overload-local" {
		t.Fatalf("with a 50ms timeout: decided by %s, want fallback-open or overload-local (the pause did not hold?)", before.DecidedBy)
	}
	waitStrict(t, cl, key, time.Now(), 10*time.Second)

	if err := os.WriteFile(path, []byte(strings.Replace(timeoutConfig, "%s", "2s", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Signal(syscall.SIGHUP)
	if !s.waitLog("config reloaded", 10*time.Second) {
		t.Fatalf("no reload logged:\n%s", s.Logs())
	}
	after, took := stalled()
	t.Logf("timeout 2s after SIGHUP, primary paused for 300ms: decided by %s in %v", after.DecidedBy, took.Round(time.Millisecond))
	if after.DecidedBy != "store" {
		t.Errorf("with a 2s timeout: decided by %s in %v, want store", after.DecidedBy, took.Round(time.Millisecond))
	} else if took < 200*time.Millisecond {
		t.Errorf("answered in %v: the pause did not hold, the test proves nothing", took)
	}
}
