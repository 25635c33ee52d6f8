package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// Timeout is the deadline of calls made without one, MaxTimeout the bound
// of every other: with Timeout 50ms and MaxTimeout 10s, a request with 2s
// left waits out a primary that holds its clients for 300ms (CLIENT PAUSE)
// and gets the store's answer; against a stopped primary (SIGSTOP), calls
// without a deadline — a take, a reset, a ping with its slot-map reload —
// give up after about Timeout, not MaxTimeout.
func TestTimeoutAndMaxTimeout(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{Replicas: -1, NodeTimeout: 30 * time.Second})
	s, err := New(Config{Addrs: c.Addrs(), Timeout: 50 * time.Millisecond, MaxTimeout: 10 * time.Second, BreakerThreshold: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	p := &limit.Policy{Limit: 1_000_000, Rate: 1, Period: time.Hour}
	const key = "stall"
	if r := takeN(ctx, s, p, key)[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	owner, err := c.PrimaryForKey(ctx, Key(key))
	if err != nil {
		t.Fatal(err)
	}

	if err := owner.Client().Do(ctx, "CLIENT", "PAUSE", 300, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	start := time.Now()
	r := takeN(dctx, s, p, key)[0]
	took := time.Since(start)
	cancel()
	t.Logf("primary paused 300ms, request with 2s left: %v in %v", r.Err, took.Round(time.Millisecond))
	if r.Err != nil || r.DecidedBy != limit.ByStore {
		t.Errorf("take with 2s left: %+v; want the store's answer", r)
	} else if took < 200*time.Millisecond {
		t.Errorf("answered in %v: the pause did not hold, the test proves nothing", took)
	}

	if err := owner.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = owner.Resume() }()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"take", func() error { return takeN(ctx, s, p, key)[0].Err }},
		{"reset", func() error { _, err := s.Reset(ctx, key, p); return err }},
		{"ping", func() error { return s.Ping(ctx) }},
	} {
		start := time.Now()
		err := tc.call()
		took := time.Since(start)
		t.Logf("%s without a deadline, primary stopped: %v in %v", tc.name, err, took.Round(time.Millisecond))
		if err == nil {
			t.Errorf("%s: no error from a stopped primary", tc.name)
		} else if tc.name != "ping" && !errors.Is(err, limit.ErrUnavailable) {
			t.Errorf("%s: %v; want unavailable", tc.name, err)
		}
		if took > 2*time.Second {
			t.Errorf("%s took %v; want about Timeout (50ms), far from MaxTimeout (10s)", tc.name, took)
		}
	}
}
