package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// reshardPolicy: a cap small enough to matter under load, and a timeout
// long enough that CPU noise never sends a decision to the failure policy.
const reshardPolicy = `
policies:
  - name: busy
    match: "*"
    limit: 200
    rate: 100
    period: 1s
    on_store_error: closed
    deny_cache: false         # the test watches the store and the failure policy, not the deny cache
    hot: {mode: off}          # the test watches the store and the failure policy, not hot-key leases
`

// A live resharding by hand, as an operator or `redis-cli --cluster
// reshard` does it, of the slot of a busy key: sluice follows ASK while the
// slot migrates and MOVED after, with no error reply, and the cap holds
// across the move. The final CLUSTER SETSLOT … NODE reaches the two nodes
// in either order; when the source learns first, for a moment each of the
// two names the other as the owner and a request goes back and forth
// between them (MOVED, MOVED, …): sluice goes round again within the
// request's deadline, and past it answers with on_store_error (here
// closed), never with an error reply.
func TestReshardLiveSlotMove(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		sourceFirst bool // the source hears of the new owner first
		pastTimeout bool // and the target only after some requests timed out
	}{
		{"target learns first", false, false},
		{"source learns first", true, false},
		{"the two disagree past the timeout", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reshardLive(t, tc.sourceFirst, tc.pastTimeout)
		})
	}
}

func reshardLive(t *testing.T, sourceFirst, pastTimeout bool) {
	c := redistest.NewCluster(t, localredis.Config{Replicas: -1})
	s := startSluice(t, "--config", writeConfig(t, reshardPolicy), "--cluster", strings.Join(c.Addrs(), ","),
		"--timeout", "1s")
	cl := s.client(t)
	ctx := t.Context()
	const key = "reshard"
	rkey := cluster.Key(key)
	slot := localredis.Slot(rkey)
	src, err := c.PrimaryForKey(ctx, rkey)
	if err != nil {
		t.Fatal(err)
	}
	var dst *localredis.Node
	for _, p := range c.Primaries() {
		if p != src {
			dst = p
			break
		}
	}
	assign := func(m *localredis.SlotMove, n *localredis.Node) {
		t.Helper()
		if err := m.Assign(ctx, n); err != nil {
			t.Fatal(err)
		}
	}

	began := time.Now()
	l := startLoad(t, cl, 8, key)
	waitFor(t, 10*time.Second, "the key never appeared on its owner", func() bool {
		n, err := src.Client().Exists(ctx, rkey).Result()
		return err == nil && n == 1 && l.decisions() > 100
	})

	moveBegan := time.Now()
	before := l.decisions()
	// The steps of localredis's MoveSlot one by one, to look in between.
	mv, err := c.BeginMove(ctx, slot, dst)
	if err != nil {
		t.Fatal(err)
	}
	if mv.From != src {
		t.Fatalf("BeginMove moves slot %d from %s, want %s", slot, mv.From.Addr, src.Addr)
	}
	// Traffic on the migrating slot while the key is still on the source.
	n := l.decisions()
	waitFor(t, 10*time.Second, "no decisions while MIGRATING", func() bool { return l.decisions() > n+100 })
	migrated, err := mv.MoveKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The key is on the target, the slot still the source's: ASK.
	waitFor(t, 10*time.Second, "no ASKING reached the target", func() bool {
		return mustInfoCount(t, dst, "commandstats", "cmdstat_asking") > 100
	})
	asking := mustInfoCount(t, dst, "commandstats", "cmdstat_asking")
	askErrs := mustInfoCount(t, src, "errorstats", "errorstat_ASK")

	final := time.Now()
	var bounced, disagreed int64
	if sourceFirst {
		assign(mv, src)
		// The source now sends the key's requests to the target, which
		// still sends them back: wait until it has, many times.
		m := mustInfoCount(t, dst, "errorstats", "errorstat_MOVED")
		waitFor(t, 10*time.Second, "the target never sent a request back to the source", func() bool {
			bounced = mustInfoCount(t, dst, "errorstats", "errorstat_MOVED") - m
			return bounced >= 50
		})
		if pastTimeout {
			waitFor(t, 10*time.Second, "no on_store_error decision while the nodes disagree", func() bool {
				return l.fallbacks() > 0
			})
		}
		disagreed = mustInfoCount(t, dst, "errorstats", "errorstat_MOVED") - m
		assign(mv, dst)
	} else {
		assign(mv, dst)
		assign(mv, src)
	}
	// The other primaries, and a wait until every node names the target.
	if err := mv.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "no MOVED from the old owner", func() bool {
		return mustInfoCount(t, src, "errorstats", "errorstat_MOVED") > 0
	})
	strictAt := waitStrict(t, cl, key, final, 10*time.Second)
	// Sluice routes straight to the new owner once MOVED stops growing.
	var direct time.Duration
	last, stable := int64(-1), time.Now()
	waitFor(t, 10*time.Second, "MOVED replies from the old owner never stopped", func() bool {
		m := mustInfoCount(t, src, "errorstats", "errorstat_MOVED")
		if m != last {
			last, stable = m, time.Now()
			direct = time.Since(final)
			return false
		}
		return time.Since(stable) > 300*time.Millisecond
	})
	moveDecisions := l.decisions() - before
	moveFor := time.Since(moveBegan).Round(time.Millisecond)
	slowestMove := time.Duration(l.tl.slowest.Load())

	// Decisions after the move come from the new owner, which holds the key.
	n = l.decisions()
	waitFor(t, 10*time.Second, "no decisions after the move", func() bool { return l.decisions() > n+500 })
	l.finish()
	elapsed := time.Since(began)
	commandsAfter := mustInfoCount(t, dst, "commandstats", "cmdstat_evalsha") + mustInfoCount(t, dst, "commandstats", "cmdstat_eval")
	if e, err := dst.Client().Exists(ctx, rkey).Result(); err != nil || e != 1 {
		t.Errorf("EXISTS %s on the new owner = %d, %v; want 1", rkey, e, err)
	}
	if n, err := src.Client().DBSize(ctx).Result(); err != nil || n != 0 {
		t.Errorf("DBSIZE of the old owner = %d, %v; want 0", n, err)
	}
	if owner, err := c.PrimaryForKey(ctx, rkey); err != nil || owner != dst {
		t.Errorf("owner after the move = %v, %v; want %s", owner, err, dst.Addr)
	}
	moved := mustInfoCount(t, src, "errorstats", "errorstat_MOVED")

	limitCap := 200 + 100*elapsed.Seconds() + 1
	t.Logf("slot %d of %q moved %s → %s (%d key(s) migrated): %d decisions during the move (%v), slowest reply %v",
		slot, rkey, src.Addr, dst.Addr, migrated, moveDecisions, moveFor, slowestMove)
	t.Logf("ASKING on the target: %d (ASK replies from the source: %d); MOVED replies from the source: %d; "+
		"strict %v after the final SETSLOT, routed straight to the new owner after %v; script calls on the target: %d",
		asking, askErrs, moved, strictAt, direct.Round(time.Millisecond), commandsAfter)
	if sourceFirst {
		t.Logf("the source learned first: the target sent %d requests back before it learned too", disagreed)
	}
	t.Logf("whole run %v: %s; admitted %d, cap 200 + 100/s × elapsed + 1 = %.1f",
		elapsed.Round(time.Millisecond), &l.tl, l.tl.allowed.Load(), limitCap)
	if l.tl.errors.Load() != 0 {
		t.Errorf("error replies: %s", &l.tl)
	}
	switch got, fell := l.by("store"), l.fallbacks(); {
	case !pastTimeout && got != l.decisions():
		t.Errorf("%d of %d decisions not by the store: %s", l.decisions()-got, l.decisions(), &l.tl)
	case pastTimeout && (fell == 0 || got+fell != l.decisions()):
		t.Errorf("%d decisions by the store and %d by on_store_error of %d; want some of each, nothing else: %s",
			got, fell, l.decisions(), &l.tl)
	}
	if a := float64(l.tl.allowed.Load()); a > limitCap {
		t.Errorf("admitted %.0f, more than the cap %.1f", a, limitCap)
	}
	if moved == 0 || asking == 0 {
		t.Errorf("ASKING %d, MOVED %d: both paths must be exercised", asking, moved)
	}
}
