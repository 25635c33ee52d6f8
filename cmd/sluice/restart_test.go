package main

import (
	"bufio"
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// faultTimeout is the --timeout of the sluice processes of the fault tests,
// and faultMargin what a reply may take beyond it: nothing hangs.
const (
	faultTimeout = 100 * time.Millisecond
	faultMargin  = 250 * time.Millisecond
)

// faultPolicies: "open:" keys fail open, everything else fails closed. The
// limits are large and the refill slow, so that a drained bucket stays
// drained for the length of a test.
const faultPolicies = `
policies:
  - name: open
    match: "open:*"
    limit: 1000
    rate: 1
    period: 1h
    on_store_error: open
    deny_cache: false         # the test watches the store and the failure policy, not the deny cache
    hot: {mode: off}          # the test watches the store and the failure policy, not hot-key leases
  - name: closed
    match: "*"
    limit: 1000
    rate: 1
    period: 1h
    on_store_error: closed
    deny_cache: false         # the test watches the store and the failure policy, not the deny cache
    hot: {mode: off}          # the test watches the store and the failure policy, not hot-key leases
`

// load is RL.TAKE traffic on one key in the background, counted in tl.
type load struct {
	tl   tally
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// startLoad runs workers goroutines of RL.TAKE key on cl until finish, at
// most 60s; finish is also called at cleanup.
func startLoad(t *testing.T, cl *redis.Client, workers int, key string) *load {
	t.Helper()
	l := &load{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		hammer([]*redis.Client{cl}, workers, key, 60*time.Second, l.stop, &l.tl)
		close(l.done)
	}()
	t.Cleanup(l.finish)
	return l
}

func (l *load) finish() {
	l.once.Do(func() { close(l.stop) })
	<-l.done
}

func (l *load) decisions() int64 { return l.tl.allowed.Load() + l.tl.rejected.Load() }

// by returns how many replies were decided by path.
func (l *load) by(path string) int64 {
	l.tl.mu.Lock()
	defer l.tl.mu.Unlock()
	return l.tl.by[path]
}

// fallbacks returns the replies decided by any failure policy.
func (l *load) fallbacks() int64 {
	l.tl.mu.Lock()
	defer l.tl.mu.Unlock()
	var n int64
	for path, v := range l.tl.by {
		if strings.HasPrefix(path, "fallback-") {
			n += v
		}
	}
	return n
}

// waitFor polls cond every 5ms until it holds or d has passed.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitStrict sends RL.TAKE key until the store decides it, and returns how
// long that took from since. An error reply fails the test.
func waitStrict(t *testing.T, cl *redis.Client, key string, since time.Time, within time.Duration) time.Duration {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r, err := take(context.Background(), cl, key, 1)
		if err != nil {
			t.Fatalf("%s: error reply while waiting for a strict decision: %v", key, err)
		}
		if r.DecidedBy == "store" {
			return time.Since(since).Round(time.Millisecond)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no strict decision within %v: %+v", key, within, r)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// infoCount reads an INFO counter of c: for field "cmdstat_asking" of
// section "commandstats" the calls=, for "errorstat_MOVED" of "errorstats"
// the count=; a plain "field:N" line gives N. A missing field is 0.
func infoCount(ctx context.Context, c *redis.Client, section, field string) (int64, error) {
	text, err := c.Info(ctx, section).Result()
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), field+":")
		if !ok {
			continue
		}
		first, _, _ := strings.Cut(v, ",")
		if _, after, ok := strings.Cut(first, "="); ok {
			first = after
		}
		return strconv.ParseInt(first, 10, 64)
	}
	return 0, nil
}

func mustInfoCount(t *testing.T, n *localredis.Node, section, field string) int64 {
	t.Helper()
	v, err := infoCount(t.Context(), n.Client(), section, field)
	if err != nil {
		t.Fatalf("%s: INFO %s: %v", n.Addr, section, err)
	}
	return v
}

// keyOn returns a user key, prefix plus a number, whose slot n owns.
func keyOn(t *testing.T, c *localredis.Cluster, n *localredis.Node, prefix string) string {
	t.Helper()
	for i := range 1000 {
		key := prefix + strconv.Itoa(i)
		owner, err := c.PrimaryForKey(t.Context(), cluster.Key(key))
		if err != nil {
			t.Fatal(err)
		}
		if owner == n {
			return key
		}
	}
	t.Fatalf("no key %s0…999 lands on %s", prefix, n.Addr)
	return ""
}

func startFaultSluice(t *testing.T, c *localredis.Cluster) *redis.Client {
	t.Helper()
	s := startSluice(t, "--config", writeConfig(t, faultPolicies), "--cluster", strings.Join(c.Addrs(), ","),
		"--timeout", faultTimeout.String())
	return s.client(t)
}

func mustStrict(t *testing.T, cl *redis.Client, key string) {
	t.Helper()
	if r, err := take(context.Background(), cl, key, 1); err != nil || r.DecidedBy != "store" {
		t.Fatalf("%s before the fault: %+v %v", key, r, err)
	}
}

// Kill the owning primary, let its replica be promoted, then restart the
// old node: it rejoins as a replica of the new primary. Traffic flows all
// along with no error reply.
func TestRestartFailedOverPrimary(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{NodeTimeout: time.Second})
	cl := startFaultSluice(t, c)
	ctx := t.Context()
	old := c.Primaries()[0]
	key := keyOn(t, c, old, "failover:")
	mustStrict(t, cl, key)

	l := startLoad(t, cl, 4, key)
	began := time.Now()
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	promoted, err := c.WaitNewPrimary(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	promotedAt := time.Since(began).Round(time.Millisecond)
	strictAt := waitStrict(t, cl, key, began, 10*time.Second)
	during := l.tl.String()
	duringN := l.decisions()

	restarted := time.Now()
	if err := old.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	rejoined := time.Since(restarted).Round(time.Millisecond)
	if !slices.Contains(c.ReplicasOf(promoted), old) {
		t.Errorf("restarted %s is not a replica of %s", old.Addr, promoted.Addr)
	}
	strictAfterRejoin := waitStrict(t, cl, key, restarted, 10*time.Second)
	// Traffic a little longer against the settled cluster.
	n := l.decisions()
	waitFor(t, 10*time.Second, "no decisions after the rejoin", func() bool { return l.decisions() > n+200 })
	l.finish()
	t.Logf("kill %s: %s promoted %v after; strict %v after the kill; %d decisions until then: %s",
		old.Addr, promoted.Addr, promotedAt, strictAt, duringN, during)
	t.Logf("restart of the old primary: rejoined as replica in %v, strict %v after the restart; whole run: %s",
		rejoined, strictAfterRejoin, &l.tl)
	if l.tl.errors.Load() != 0 {
		t.Fatalf("error replies: %s", &l.tl)
	}
}

// A primary with no replica is killed and restarted empty: its data and
// script cache are gone. While it is down the failure policy answers; after
// it the script is loaded again (NOSCRIPT, then EVAL) without an error
// reply, and the bucket starts full.
func TestRestartEmptyPrimary(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{Replicas: -1, NodeTimeout: 2 * time.Second})
	cl := startFaultSluice(t, c)
	ctx := t.Context()
	owner := c.Primaries()[1]
	// Two keys with one hash tag: one slot, one node.
	tag := keyOn(t, c, owner, "empty")
	busy, quiet := "{"+tag+"}:busy", "{"+tag+"}:quiet"
	if o, err := c.PrimaryForKey(ctx, cluster.Key(quiet)); err != nil || o != owner {
		t.Fatalf("%s is on %v, want %s (%v)", quiet, o, owner.Addr, err)
	}
	mustStrict(t, cl, busy)
	if r, err := take(ctx, cl, quiet, 1000); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("draining %s: %+v %v", quiet, r, err)
	}

	l := startLoad(t, cl, 4, busy)
	began := time.Now()
	if err := owner.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "no fallback decision while the primary is down", func() bool { return l.by("fallback-closed") > 50 })
	down := l.tl.String()
	downN := l.decisions()
	downFor := time.Since(began).Round(time.Millisecond)
	if s := time.Duration(l.tl.slowest.Load()); s > faultTimeout+faultMargin {
		t.Errorf("slowest reply while down %v, want ≤ %v", s, faultTimeout+faultMargin)
	}

	restarted := time.Now()
	if err := owner.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	strictAt := waitStrict(t, cl, busy, restarted, 10*time.Second)
	n := l.decisions()
	waitFor(t, 10*time.Second, "no decisions after the restart", func() bool { return l.decisions() > n+200 })
	l.finish()

	r, err := take(ctx, cl, quiet, 1)
	if err != nil || r.DecidedBy != "store" || r.Remaining != 999 {
		t.Errorf("%s after the restart: %+v %v; want a strict decision from a full bucket (remaining 999)", quiet, r, err)
	}
	noscript := mustInfoCount(t, owner, "errorstats", "errorstat_NOSCRIPT")
	t.Logf("kill %s (no replica): %d decisions in %v down: %s", owner.Addr, downN, downFor, down)
	t.Logf("restarted empty: strict %v after the restart; NOSCRIPT replies on it: %d; whole run: %s", strictAt, noscript, &l.tl)
	if noscript == 0 {
		t.Error("the restarted node never answered NOSCRIPT: the reload path was not exercised")
	}
	if l.tl.errors.Load() != 0 {
		t.Fatalf("error replies: %s", &l.tl)
	}
}

// Every node is killed, then every node restarted: sluice, left running,
// answers by its failure policy meanwhile and is strict again on its own.
func TestWholeClusterRestart(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{NodeTimeout: 2 * time.Second})
	cl := startFaultSluice(t, c)
	ctx := t.Context()
	var keys []string
	for i, p := range c.Primaries() {
		prefix := "whole:"
		if i == 0 {
			prefix = "open:whole:"
		}
		keys = append(keys, keyOn(t, c, p, prefix))
	}
	loads := make([]*load, len(keys))
	for i, k := range keys {
		mustStrict(t, cl, k)
		loads[i] = startLoad(t, cl, 3, k)
	}
	began := time.Now()
	nodes := c.Nodes()
	for _, n := range nodes {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range loads {
		waitFor(t, 10*time.Second, "no fallback decision with every node down", func() bool { return l.fallbacks() > 50 })
	}
	var restartErr error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, n := range nodes {
		wg.Go(func() {
			if err := n.Restart(ctx); err != nil {
				mu.Lock()
				restartErr = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if restartErr != nil {
		t.Fatal(restartErr)
	}
	restarted := time.Now()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	healthy := time.Since(restarted).Round(time.Millisecond)
	var strict []time.Duration
	for _, k := range keys {
		strict = append(strict, waitStrict(t, cl, k, restarted, 15*time.Second))
	}
	for i, l := range loads {
		l.finish()
		t.Logf("%s: %s", keys[i], &l.tl)
		if l.tl.errors.Load() != 0 {
			t.Errorf("%s: error replies: %s", keys[i], &l.tl)
		}
	}
	t.Logf("all %d nodes killed and restarted: down %v, healthy %v after the restart, strict decisions %v after the restart",
		len(nodes), restarted.Sub(began).Round(time.Millisecond), healthy, strict)
}

// Two of three primaries (no replicas) are killed: the survivor, in the
// minority, answers CLUSTERDOWN. The failure policy answers every key within
// the deadline, with no error reply; after the restart decisions are strict.
func TestClusterDownMajority(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{Replicas: -1, NodeTimeout: time.Second})
	cl := startFaultSluice(t, c)
	ctx := t.Context()
	primaries := c.Primaries()
	survivor, dead := primaries[0], primaries[1:]
	onSurvivor := keyOn(t, c, survivor, "open:down:")
	onDead := keyOn(t, c, dead[0], "down:")
	mustStrict(t, cl, onSurvivor)
	mustStrict(t, cl, onDead)
	ls, ld := startLoad(t, cl, 4, onSurvivor), startLoad(t, cl, 4, onDead)

	began := time.Now()
	for _, n := range dead {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			for _, n := range dead {
				_ = n.Restart(context.Background())
			}
		}
	})
	waitFor(t, 15*time.Second, "the survivor never reported cluster_state:fail", func() bool {
		info, err := survivor.Client().ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:fail")
	})
	failAt := time.Since(began).Round(time.Millisecond)
	waitFor(t, 10*time.Second, "no fallback decision on the survivor's key during CLUSTERDOWN", func() bool {
		return ls.by("fallback-open") > 50
	})
	// Stay down a little longer: every reply still comes in time.
	n := ls.decisions() + ld.decisions()
	waitFor(t, 10*time.Second, "no decisions during CLUSTERDOWN", func() bool { return ls.decisions()+ld.decisions() > n+500 })
	clusterdown := mustInfoCount(t, survivor, "errorstats", "errorstat_CLUSTERDOWN")
	down := time.Since(began).Round(time.Millisecond)
	duringS, duringD := ls.tl.String(), ld.tl.String()
	slowS, slowD := time.Duration(ls.tl.slowest.Load()), time.Duration(ld.tl.slowest.Load())

	restarted := time.Now()
	for _, n := range dead {
		if err := n.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	restored = true
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	strictS := waitStrict(t, cl, onSurvivor, restarted, 10*time.Second)
	strictD := waitStrict(t, cl, onDead, restarted, 10*time.Second)
	ls.finish()
	ld.finish()
	t.Logf("2 of 3 primaries killed: survivor in cluster_state:fail %v after; CLUSTERDOWN replies %d; down %v", failAt, clusterdown, down)
	t.Logf("survivor's key during: %s", duringS)
	t.Logf("dead node's key during: %s", duringD)
	t.Logf("strict %v (survivor's key) and %v (dead node's key) after the restart; whole run: %s | %s", strictS, strictD, &ls.tl, &ld.tl)
	if clusterdown == 0 {
		t.Error("the survivor never answered CLUSTERDOWN")
	}
	for _, s := range []time.Duration{slowS, slowD} {
		if s > faultTimeout+faultMargin {
			t.Errorf("slowest reply during CLUSTERDOWN %v, want ≤ %v", s, faultTimeout+faultMargin)
		}
	}
	if ls.tl.errors.Load()+ld.tl.errors.Load() != 0 {
		t.Fatalf("error replies: %s | %s", &ls.tl, &ld.tl)
	}
	if ld.by("fallback-closed") == 0 {
		t.Errorf("dead node's key: no fallback-closed decision: %s", &ld.tl)
	}
}
