package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

func TestSentinelConfigErrors(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{MasterName: "mymaster"},
		{SentinelAddrs: []string{"127.0.0.1:26379"}},
		{MasterName: "mymaster", SentinelAddrs: []string{"127.0.0.1:26379"}, Addrs: []string{"127.0.0.1:7000"}},
		{MasterName: "mymaster", SentinelAddrs: []string{"127.0.0.1:26379"}, URL: "redis://127.0.0.1:6379"},
		{MasterName: "mymaster", SentinelAddrs: []string{"127.0.0.1"}},
		{MasterName: "mymaster", SentinelAddrs: []string{":26379"}},
	} {
		if s, err := New(cfg); err == nil {
			_ = s.Close()
			t.Errorf("New(%+v) = nil error, want a config error", cfg)
		}
	}
}

// failoverLoad sends batches of takes to a store from a few goroutines and
// sorts the outcomes: decided by the store, unavailable (a connectivity
// failure, for on_store_error), or any other error, which would become an
// error reply.
type failoverLoad struct {
	strict, unavailable, other atomic.Int64
	lastStrict                 atomic.Int64 // unix ns of the latest strict result
	mu                         sync.Mutex
	firstOther                 error
	stop                       chan struct{}
	wg                         sync.WaitGroup
}

func startFailoverLoad(s *Store, p *limit.Policy, workers int) *failoverLoad {
	l := &failoverLoad{stop: make(chan struct{})}
	end := time.Now().Add(60 * time.Second)
	for w := range workers {
		l.wg.Go(func() {
			keys := []string{"fo:" + strconv.Itoa(w), "fo:" + strconv.Itoa(w) + ":b"}
			for time.Now().Before(end) {
				select {
				case <-l.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				out := takeN(ctx, s, p, keys...)
				cancel()
				down := false
				for _, r := range out {
					down = l.add(r) || down
				}
				if down {
					// An open breaker fails at once: pace the loop
					// rather than spin on a shared machine.
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	return l
}

// add files r; it reports whether r failed.
func (l *failoverLoad) add(r limit.Result) bool {
	switch {
	case r.Err == nil && r.DecidedBy == limit.ByStore:
		l.strict.Add(1)
		l.lastStrict.Store(time.Now().UnixNano())
	case errors.Is(r.Err, limit.ErrUnavailable):
		l.unavailable.Add(1)
	default:
		l.other.Add(1)
		l.mu.Lock()
		if l.firstOther == nil {
			l.firstOther = fmt.Errorf("%+v", r)
		}
		l.mu.Unlock()
	}
	return r.Err != nil
}

func (l *failoverLoad) finish() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

func (l *failoverLoad) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("strict=%d unavailable=%d other=%d first_other=%v", l.strict.Load(), l.unavailable.Load(), l.other.Load(), l.firstOther)
}

// waitStrictAfter polls until a result decided by the store arrives after
// t0, and returns how long after t0 it came.
func (l *failoverLoad) waitStrictAfter(t *testing.T, t0 time.Time, within time.Duration) time.Duration {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if ns := l.lastStrict.Load(); ns > t0.UnixNano() {
			return time.Duration(ns - t0.UnixNano()).Round(time.Millisecond)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no strict decision within %v after %v: %s", within, t0, l)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func infoField(t *testing.T, n *localredis.Node, section, field string) string {
	t.Helper()
	text, err := n.Client().Info(t.Context(), section).Result()
	if err != nil {
		t.Fatalf("%s: INFO %s: %v", n.Addr, section, err)
	}
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// A store on Sentinel through a crash of the primary, a manual failover
// and a primary that hangs (SIGSTOP), under load: during each window every failed request is a
// connectivity failure (for on_store_error), never another error; the
// store is strict again after the promotion, on the same queue and breaker.
func TestSentinelStoreFailover(t *testing.T) {
	t.Parallel()
	g := redistest.NewSentinel(t, localredis.SentinelConfig{Replicas: 3, SentinelPassword: "s3ntinel"})
	ctx := t.Context()
	s, err := New(Config{MasterName: g.MasterName(), SentinelAddrs: g.SentinelAddrs(), SentinelPassword: "s3ntinel", Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	t.Run("start-up check", func(t *testing.T) {
		if addr, err := s.SentinelPrimary(ctx, 0); err != nil || addr != g.Primary().Addr {
			t.Errorf("SentinelPrimary = %q, %v; want %s", addr, err, g.Primary().Addr)
		}
		for _, tt := range []struct {
			name  string
			cfg   Config
			check func(error) bool
		}{
			{"unknown name", Config{MasterName: "nosuch", SentinelAddrs: g.SentinelAddrs(), SentinelPassword: "s3ntinel"},
				func(err error) bool { return errors.Is(err, ErrUnknownPrimary) }},
			{"no sentinel password", Config{MasterName: g.MasterName(), SentinelAddrs: g.SentinelAddrs()},
				func(err error) bool {
					return err != nil && strings.Contains(err.Error(), "NOAUTH") && !errors.Is(err, limit.ErrUnavailable)
				}},
			{"no sentinel answers", Config{MasterName: g.MasterName(), SentinelAddrs: []string{"127.0.0.1:1"}},
				func(err error) bool { return errors.Is(err, limit.ErrUnavailable) }},
		} {
			bad, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			addr, err := bad.SentinelPrimary(ctx, 0)
			_ = bad.Close()
			if !tt.check(err) {
				t.Errorf("%s: SentinelPrimary = %q, %v", tt.name, addr, err)
			}
			t.Logf("%s: %v", tt.name, err)
		}
	})

	p := &limit.Policy{Limit: 100_000, Rate: 100_000, Period: time.Second}
	if r := takeN(ctx, s, p, "fo:warm")[0]; r.Err != nil || r.DecidedBy != limit.ByStore {
		t.Fatalf("first take: %+v", r)
	}

	t.Run("crash", func(t *testing.T) {
		old := g.Primary()
		l := startFailoverLoad(s, p, 4)
		defer l.finish()
		waitUntil(t, 10*time.Second, "200 strict decisions after the failover", func() bool { return l.strict.Load() > 200 })
		killed := time.Now()
		if err := old.Kill(); err != nil {
			t.Fatal(err)
		}
		promoted, err := g.WaitNewPrimary(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		promotedAfter := time.Since(killed).Round(time.Millisecond)
		strictAfter := l.waitStrictAfter(t, time.Now(), 15*time.Second)
		l.finish()
		t.Logf("SIGKILL %s: sentinels name %s after %v; strict again %v later; %s; NOSCRIPT on the new primary: %s",
			old.Addr, promoted.Addr, promotedAfter, strictAfter, l, infoField(t, promoted, "errorstats", "errorstat_NOSCRIPT"))
		if l.other.Load() != 0 || l.unavailable.Load() == 0 {
			t.Errorf("want only connectivity failures in the window, and some: %s", l)
		}
		// A batch goes by FCALL of the library, which FUNCTION LOAD
		// replicated: the promoted replica has it, and only a request by
		// its own script meets NOSCRIPT there.
		if infoField(t, promoted, "errorstats", "errorstat_NOSCRIPT") == "" && infoField(t, promoted, "commandstats", "cmdstat_fcall") == "" {
			t.Error("the promoted replica answered neither NOSCRIPT nor FCALL: neither the reload path nor the replicated library was exercised")
		}
	})

	t.Run("SENTINEL FAILOVER", func(t *testing.T) {
		old := g.Primary()
		l := startFailoverLoad(s, p, 4)
		defer l.finish()
		waitUntil(t, 10*time.Second, "200 strict decisions after the failover", func() bool { return l.strict.Load() > 200 })
		began := time.Now()
		if err := g.Failover(ctx); err != nil {
			t.Fatal(err)
		}
		promoted, err := g.WaitNewPrimary(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		promotedAfter := time.Since(began).Round(time.Millisecond)
		strictAfter := l.waitStrictAfter(t, time.Now(), 15*time.Second)
		l.finish()
		t.Logf("SENTINEL FAILOVER %s → %s: named after %v; strict again %v later; %s; READONLY replies of the demoted primary: %q",
			old.Addr, promoted.Addr, promotedAfter, strictAfter, l, infoField(t, old, "errorstats", "errorstat_READONLY"))
		if l.other.Load() != 0 {
			t.Errorf("want only connectivity failures in the window: %s", l)
		}
	})

	t.Run("SIGSTOP", func(t *testing.T) {
		old := g.Primary()
		l := startFailoverLoad(s, p, 4)
		defer l.finish()
		waitUntil(t, 10*time.Second, "200 strict decisions after the failover", func() bool { return l.strict.Load() > 200 })
		stopped := time.Now()
		if err := old.Pause(); err != nil {
			t.Fatal(err)
		}
		promoted, err := g.WaitNewPrimary(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		promotedAfter := time.Since(stopped).Round(time.Millisecond)
		strictAfter := l.waitStrictAfter(t, time.Now(), 15*time.Second)
		// The old primary wakes up still believing it is the primary,
		// until the sentinels turn it into a replica: nothing may reach it.
		if err := old.Resume(); err != nil {
			t.Fatal(err)
		}
		n := l.strict.Load()
		waitUntil(t, 10*time.Second, "200 strict decisions after the failover", func() bool { return l.strict.Load() > n+500 })
		l.finish()
		t.Logf("SIGSTOP %s: sentinels name %s after %v; strict again %v later; with the old primary resumed: %s",
			old.Addr, promoted.Addr, promotedAfter, strictAfter, l)
		if l.other.Load() != 0 || l.unavailable.Load() == 0 {
			t.Errorf("want only connectivity failures in the window, and some: %s", l)
		}
	})

	stats := s.Stats()
	if len(stats) != 1 || stats[0].Breaker != "closed" {
		t.Errorf("Stats() after two failovers = %+v, want one node, breaker closed", stats)
	}
	if got := g.Primary(); got.Paused() || !got.Running() {
		t.Errorf("the last primary %s is not running", got.Addr)
	}
}
