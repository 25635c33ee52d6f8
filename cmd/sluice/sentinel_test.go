package main

import (
	"context"
	"maps"
	"os"
	"path/filepath"
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

// sentinelPolicies: "shared:" keys are the cross-instance check (limit 10,
// no refill to speak of); the load's keys fall back to a local bucket
// while the store cannot answer.
const sentinelPolicies = `
policies:
  - name: shared
    match: "shared:*"
    limit: 10
    rate: 1
    period: 1h
    on_store_error: closed
  - name: busy
    match: "*"
    limit: 100000
    rate: 100000
    period: 1s
    on_store_error: local
    hot: {mode: off}          # the test watches the store and the failure policy, not hot-key leases
`

// sentinelTimeout is the --timeout of the sentinel test: well above CPU
// noise on a shared machine, so that every fallback is the failover's.
const sentinelTimeout = 250 * time.Millisecond

// sharedTakes sends 20 RL.TAKE key from each client at once and returns
// how many were admitted, and how many admitted by the store.
func sharedTakes(t *testing.T, clients []*redis.Client, key string) (admitted, byStore int64) {
	t.Helper()
	var a, s atomic.Int64
	var wg sync.WaitGroup
	for _, c := range clients {
		for range 20 {
			wg.Go(func() {
				r, err := take(context.Background(), c, key, 1)
				if err != nil {
					t.Errorf("RL.TAKE %s: %v", key, err)
					return
				}
				if r.Allowed {
					a.Add(1)
					if r.DecidedBy == "store" {
						s.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	return a.Load(), s.Load()
}

// snapshot copies the decided_by counts of l, with "error" for error replies.
func snapshot(l *load) map[string]int64 {
	l.tl.mu.Lock()
	m := maps.Clone(l.tl.by)
	l.tl.mu.Unlock()
	if m == nil {
		m = map[string]int64{}
	}
	m["error"] = l.tl.errors.Load()
	return m
}

// sinceSnap is b minus a, per path, dropping zeros.
func sinceSnap(a, b map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range b {
		if v-a[k] != 0 {
			d[k] = v - a[k]
		}
	}
	return d
}

// probe sends RL.TAKE key every 2ms on one instance from start until
// stopped (at most 60s) and keeps when each reply came and who decided it,
// to time a failover from the client's side.
type probe struct {
	t0   time.Time
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	replies []probeReply
}

type probeReply struct {
	at time.Duration // since t0
	by string        // decided_by, or "error"
}

func startProbe(c *redis.Client, key string) *probe {
	p := &probe{t0: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for time.Since(p.t0) < 60*time.Second {
			select {
			case <-p.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			r, err := take(context.Background(), c, key, 1)
			by := r.DecidedBy
			if err != nil {
				by = "error"
			}
			p.mu.Lock()
			p.replies = append(p.replies, probeReply{time.Since(p.t0), by})
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *probe) finish() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// strictSince reports whether the last n replies were all the store's and
// all came after t.
func (p *probe) strictSince(t time.Time, n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.replies) < n {
		return false
	}
	for _, r := range p.replies[len(p.replies)-n:] {
		if r.by != "store" || p.t0.Add(r.at).Before(t) {
			return false
		}
	}
	return true
}

// timings are the first reply not decided by the store, and the first
// store decision after the last such reply; ok is false when every reply
// was the store's.
func (p *probe) timings() (firstOther, strictAgain time.Duration, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	last := -1
	for i, r := range p.replies {
		if r.by != "store" {
			if last < 0 {
				firstOther = r.at
			}
			last = i
		}
	}
	if last < 0 || last+1 >= len(p.replies) {
		return 0, 0, false
	}
	return firstOther, p.replies[last+1].at, true
}

// storeErrors returns the sluice_store_errors_total series of p's
// /metrics with their counts, sorted.
func storeErrors(t *testing.T, p *proc) string {
	t.Helper()
	m := adminAddrRE.FindStringSubmatch(p.Logs())
	if m == nil {
		t.Fatal("no admin address in the log")
	}
	var out []string
	for series, v := range scrapeMetrics(t, m[1]) {
		if rest, ok := strings.CutPrefix(series, "sluice_store_errors_total{"); ok {
			out = append(out, strings.TrimSuffix(rest, "}")+" "+strconv.FormatFloat(v, 'f', -1, 64))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// Two sluice processes in front of one primary with two replicas under
// three sentinels (with passwords on both): they share one limit; the
// primary is SIGKILLed under load, then a replica is promoted by hand
// (SENTINEL FAILOVER); through both, no error reply, and strict decisions
// again after each promotion, with the limit still shared.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	began := time.Now()
	g := redistest.NewSentinel(t, localredis.SentinelConfig{Replicas: 2, Password: "data-pw", SentinelPassword: "sentinel-pw"})
	dir := t.TempDir()
	storePass, sentinelPass := filepath.Join(dir, "store-pass"), filepath.Join(dir, "sentinel-pass")
	for file, pw := range map[string]string{storePass: "data-pw", sentinelPass: "sentinel-pw"} {
		if err := os.WriteFile(file, []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := writeConfig(t, sentinelPolicies)
	var procs []*proc
	var clients []*redis.Client
	for range 2 {
		p := startSluice(t, "--config", cfg, "--sentinel", g.Flag(), "--timeout", sentinelTimeout.String(),
			"--store-pass-file", storePass, "--sentinel-pass-file", sentinelPass, "--admin", "127.0.0.1:0")
		procs = append(procs, p)
		clients = append(clients, p.client(t))
	}
	ctx := t.Context()
	t.Logf("sentinel group and two sluice processes up in %v", time.Since(began).Round(time.Millisecond))
	for _, p := range procs {
		if !strings.Contains(p.Logs(), "primary="+g.Primary().Addr) {
			t.Errorf("the start-up log does not name the primary %s:\n%s", g.Primary().Addr, p.Logs())
		}
	}
	if info, err := clients[0].Info(ctx, "sluice").Result(); err != nil || !strings.Contains(info, "store:sentinel") {
		t.Errorf("INFO sluice = %q, %v; want store:sentinel", info, err)
	}
	if a, s := sharedTakes(t, clients, "shared:before"); a != 10 || s != 10 {
		t.Errorf("40 takes of a limit of 10 through two instances: %d admitted, %d by the store; want 10 and 10", a, s)
	}

	failover := func(t *testing.T, what string, act func(old *localredis.Node)) {
		old := g.Primary()
		loads := []*load{startLoad(t, clients[0], 4, "busy:a"), startLoad(t, clients[1], 4, "busy:b")}
		for _, l := range loads {
			waitFor(t, 10*time.Second, "no strict decisions before the failover", func() bool { return l.by("store") > 200 })
		}
		before := []map[string]int64{snapshot(loads[0]), snapshot(loads[1])}
		probes := []*probe{startProbe(clients[0], "busy:probe"), startProbe(clients[1], "busy:probe")}
		t0 := probes[0].t0
		act(old)
		promoted, err := g.WaitNewPrimary(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		promotedAt := time.Since(t0).Round(time.Millisecond)
		if old.Running() {
			// The sentinels demote a live old primary after the switch,
			// closing its clients: the failover is over only then.
			waitFor(t, 15*time.Second, "the old primary never became a replica", func() bool {
				role, err := old.Client().Do(ctx, "ROLE").Slice()
				return err == nil && len(role) > 0 && role[0] == "slave"
			})
		}
		settled := time.Now()
		var window []map[string]int64
		for i, p := range probes {
			waitFor(t, 15*time.Second, "no run of 20 strict decisions after the promotion", func() bool { return p.strictSince(settled, 20) })
			window = append(window, sinceSnap(before[i], snapshot(loads[i])))
		}
		// Strict again means every decision from here on is the store's.
		after := []map[string]int64{snapshot(loads[0]), snapshot(loads[1])}
		var timings []string
		for _, p := range probes {
			p.finish()
			first, strict, ok := p.timings()
			if ok {
				timings = append(timings, "first fallback "+first.Round(time.Millisecond).String()+", strict again "+strict.Round(time.Millisecond).String())
			} else {
				timings = append(timings, "every probe decided by the store")
			}
		}
		for _, l := range loads {
			n := l.decisions()
			waitFor(t, 10*time.Second, "no decisions after the promotion", func() bool { return l.decisions() > n+300 })
			l.finish()
		}
		t.Logf("%s %s: every sentinel names %s %v later; probes (RL.TAKE every 2ms, times since the %s): instance 1 %s; instance 2 %s",
			what, old.Addr, promoted.Addr, promotedAt, what, timings[0], timings[1])
		t.Logf("%s: load replies from then until a run of 20 strict probes: instance 1 %v, instance 2 %v", what, window[0], window[1])
		for i, l := range loads {
			if got := sinceSnap(after[i], snapshot(l)); len(got) != 1 || got["store"] == 0 {
				t.Errorf("instance %d after the first strict decision: %v, want only store", i+1, got)
			}
			if l.tl.errors.Load() != 0 {
				t.Errorf("instance %d: error replies: %s", i+1, &l.tl)
			}
		}
		for i, p := range procs {
			errs := storeErrors(t, p)
			t.Logf("%s: instance %d store errors so far: %s", what, i+1, errs)
			if strings.Contains(errs, "redis_error") {
				t.Errorf("instance %d: Redis answered with an error that is not a connectivity condition: %s", i+1, errs)
			}
		}
		if a, s := sharedTakes(t, clients, "shared:"+what); a != 10 || s != 10 {
			t.Errorf("after %s: 40 takes of a limit of 10 through two instances: %d admitted, %d by the store; want 10 and 10", what, a, s)
		}
	}
	t.Run("crash", func(t *testing.T) {
		failover(t, "SIGKILL", func(old *localredis.Node) {
			if err := old.Kill(); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("manual", func(t *testing.T) {
		failover(t, "SENTINEL FAILOVER", func(*localredis.Node) {
			if err := g.Failover(ctx); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Logf("whole test %v", time.Since(began).Round(time.Millisecond))
}
