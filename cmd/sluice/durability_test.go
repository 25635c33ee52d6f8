package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// durabilityPolicies is a login limit of 20 an hour that fails closed,
// with the durability under test, and a plain policy beside it.
const durabilityPolicies = `
policies:
  - name: login
    match: "login:*"
    limit: 20
    rate: 20
    period: 1h
    on_store_error: closed
    durability: %s
  - name: plain
    match: "*"
    limit: 1000
    rate: 1
    period: 1h
    on_store_error: closed
`

// durabilityRun is what one run of the failover saw.
type durabilityRun struct {
	keys                []string
	admittedBefore      map[string]int // by sluice, before the failover (acknowledged and held back)
	admittedAfter       map[string]int // by the promoted replica
	heldBackBy          map[string]int // decided_by of the takes made during the hold-back
	afterBy             map[string]int // decided_by of the takes after the promotion
	plainHeldBackByStor int            // plain-policy takes answered by the store during the hold-back
}

// TestDurableSpendsSurviveFailover holds back the replication stream of
// the primary that owns ten login keys (limit 20 per hour): its replica
// is stopped (SIGSTOP) and its replication connection killed on the
// primary, so that the primary writes only to its backlog. Four workers
// spend 8 times on each key, the primary is killed, the replica resumed
// and promoted (CLUSTER FAILOVER TAKEOVER), and each key is then spent
// until the promoted primary refuses it. Without durability the promoted
// replica lacks the held-back spends and each key admits more than its
// limit in the hour (the fault this test must reproduce, or the second
// run proves nothing); with durability: replica no spend is lost:
// admitted before plus after is at most 20 for every key, because the
// spends made during the hold-back were answered by on_store_error
// (closed: refused) instead.
func TestDurableSpendsSurviveFailover(t *testing.T) {
	for _, tc := range []struct {
		durability string
		lossy      bool
	}{{"none", true}, {"replica", false}} {
		t.Run(tc.durability, func(t *testing.T) {
			run := failoverUnderLoad(t, tc.durability, true)
			var over, total, worst int
			for _, k := range run.keys {
				n := run.admittedBefore[k] + run.admittedAfter[k]
				total += n
				worst = max(worst, n)
				if n > 20 {
					over++
				}
			}
			t.Logf("durability %s: %d keys; admitted before+after per key: worst %d of 20, %d keys over the limit, %d admitted in all (limit %d); takes during the hold-back by decided_by: %v; plain-policy takes answered by the store during it: %d; takes after the promotion by decided_by: %v",
				tc.durability, len(run.keys), worst, over, total, 20*len(run.keys), run.heldBackBy, run.plainHeldBackByStor, run.afterBy)
			switch {
			case tc.lossy && over == 0:
				t.Fatalf("without durability no key went over its limit (worst %d of 20): the hold-back did not hold the spends back, the test proves nothing", worst)
			case !tc.lossy && over > 0:
				t.Errorf("durability: replica lost spends: %d keys admitted over 20 in the hour (worst %d)", over, worst)
			}
			if !tc.lossy {
				// closed is both the on_store_error of the policy and its
				// on_overload: a take queued behind the first WAIT that
				// timed out may run out of time before it is sent.
				if n := run.heldBackBy["fallback-closed"] + run.heldBackBy["overload-closed"]; n != 80 {
					t.Errorf("takes during the hold-back answered by on_store_error or on_overload (closed): %d of 80, want all (%v)", n, run.heldBackBy)
				}
				if worst < 20 {
					t.Errorf("durability: replica: the fullest key admitted %d of 20 before and after: the promoted primary lost acknowledged spends or refused takes it holds", worst)
				}
				if run.plainHeldBackByStor != 8 {
					t.Errorf("plain-policy takes during the hold-back answered by the store: %d of 8, want all", run.plainHeldBackByStor)
				}
			}
		})
	}
}

// TestDurableSpendsSurvivePlainKill is the same failover without the
// hold-back: the primary is killed halfway through the load, while the
// replica keeps up as it can, and the replica promoted at once. Without
// durability the replica may or may not have the last spends (logged);
// with durability: replica no key admits over its limit.
func TestDurableSpendsSurvivePlainKill(t *testing.T) {
	for _, durability := range []string{"none", "replica"} {
		t.Run(durability, func(t *testing.T) {
			run := failoverUnderLoad(t, durability, false)
			var over, total, worst int
			for _, k := range run.keys {
				n := run.admittedBefore[k] + run.admittedAfter[k]
				total += n
				worst = max(worst, n)
				if n > 20 {
					over++
				}
			}
			t.Logf("durability %s, plain kill: admitted before+after per key: worst %d of 20, %d keys over the limit, %d admitted in all (limit %d); takes during the load by decided_by: %v; after the promotion: %v",
				durability, worst, over, total, 20*len(run.keys), run.heldBackBy, run.afterBy)
			if durability == "replica" && over > 0 {
				t.Errorf("durability: replica lost spends: %d keys admitted over 20 in the hour (worst %d)", over, worst)
			}
		})
	}
}

// failoverUnderLoad runs the tests' failover once, with login's
// durability set to durability: with the replication stream held back
// (holdBack) and the primary killed after the load, or killed halfway
// through it.
func failoverUnderLoad(t *testing.T, durability string, holdBack bool) durabilityRun {
	t.Helper()
	ctx := t.Context()
	c := redistest.NewCluster(t, localredis.Config{NodeTimeout: 2 * time.Second})
	s := startSluice(t, "--config", writeConfig(t, fmt.Sprintf(durabilityPolicies, durability)), "--cluster", strings.Join(c.Addrs(), ","))
	cl := s.client(t)
	owner := c.Primaries()[0]
	replicas := c.ReplicasOf(owner)
	if len(replicas) != 1 {
		t.Fatalf("%s has %d replicas, want 1", owner.Addr, len(replicas))
	}
	replica := replicas[0]
	run := durabilityRun{admittedBefore: map[string]int{}, admittedAfter: map[string]int{}, heldBackBy: map[string]int{}, afterBy: map[string]int{}}
	for i := range 10 {
		run.keys = append(run.keys, keyOn(t, c, owner, fmt.Sprintf("login:%d:", i)))
	}
	plain := keyOn(t, c, owner, "plain:")

	// A cluster just made may still be syncing its replicas.
	probe := cluster.Key(keyOn(t, c, owner, "probe:"))
	waitFor(t, 30*time.Second, "the owner's replica to acknowledge its writes", func() bool { return acknowledged(ctx, owner, probe) })

	// Two acknowledged spends per key: they reach the replica in any case.
	for _, k := range run.keys {
		for range 2 {
			if r, err := take(ctx, cl, k, 1); err != nil || !r.Allowed || r.DecidedBy != "store" {
				t.Fatalf("%s before the hold-back: %+v %v", k, r, err)
			}
			run.admittedBefore[k]++
		}
	}
	if n, err := owner.Client().Do(ctx, "WAIT", 1, 5000).Int64(); err != nil || n != 1 {
		t.Fatalf("WAIT before the hold-back: %d %v", n, err)
	}

	// Hold the stream back: the replica stops reading, and its connection
	// is closed on the primary, which then writes only to its backlog.
	resumed := !holdBack
	if holdBack {
		if err := replica.Pause(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if !resumed {
				_ = replica.Resume()
			}
		})
		if err := owner.Client().Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the primary to see no replica", func() bool {
			n, err := infoCount(ctx, owner.Client(), "replication", "connected_slaves")
			return err == nil && n == 0
		})
	}

	// 80 takes on the ten keys from four workers, and 8 of the plain
	// policy in the same pipelines.
	type job struct{ key string }
	jobs := make(chan job)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				r, err := take(ctx, cl, j.key, 1)
				mu.Lock()
				switch {
				case err != nil:
					run.heldBackBy["error: "+err.Error()]++
				case j.key == plain:
					if r.DecidedBy == "store" && r.Allowed {
						run.plainHeldBackByStor++
					}
				default:
					run.heldBackBy[r.DecidedBy]++
					if r.Allowed {
						run.admittedBefore[j.key]++
					}
				}
				mu.Unlock()
			}
		}()
	}
	for i := range 8 {
		if i == 4 && !holdBack {
			if err := owner.Kill(); err != nil {
				t.Fatal(err)
			}
		}
		for _, k := range run.keys {
			jobs <- job{k}
		}
		jobs <- job{plain}
	}
	close(jobs)
	wg.Wait()

	// Kill the primary, resume the replica and promote it.
	if holdBack {
		if err := owner.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := replica.Resume(); err != nil {
			t.Fatal(err)
		}
		resumed = true
	}
	if err := replica.Client().Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER").Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER TAKEOVER on %s: %v", replica.Addr, err)
	}
	promoted, err := c.WaitNewPrimary(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	// The killed node comes back empty, as the promoted one's replica:
	// until it has synced, a durable spend has no replica to wait for.
	if err := owner.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the old primary to acknowledge the promoted one's writes", func() bool { return acknowledged(ctx, promoted, probe) })

	// Spend each key until the promoted primary refuses it. Takes that
	// sluice answers before it follows the failover (fallback-closed) are
	// asked again.
	for _, k := range run.keys {
		deadline := time.Now().Add(30 * time.Second)
		for {
			r, err := take(ctx, cl, k, 1)
			if err == nil {
				run.afterBy[r.DecidedBy]++
			}
			if err == nil && r.DecidedBy == "store" {
				if !r.Allowed {
					break
				}
				run.admittedAfter[k]++
				continue
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no decision of the store 30s after the promotion: %+v %v", k, r, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return run
}

// acknowledged reports whether a replica of primary acknowledges a write
// to key (a key of the primary's slots that nothing else uses) within
// 100 ms: WAIT on the connection of the write. A replica that has just
// synced is "online" in INFO before it is sent the stream: Redis 7 waits
// for its first REPLCONF ACK, up to a second later.
func acknowledged(ctx context.Context, primary *localredis.Node, key string) bool {
	conn := primary.Client().Conn()
	defer conn.Close()
	if err := conn.Set(ctx, key, "x", time.Minute).Err(); err != nil {
		return false
	}
	n, err := conn.Do(ctx, "WAIT", 1, 100).Int64()
	return err == nil && n >= 1
}
