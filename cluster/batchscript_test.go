package cluster

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// A batch that reaches a node with keys of other nodes (a stale slot map):
// the batch script decides the node's own keys, marks the others, and those
// go their own way, follow MOVED, and are decided by their owners. Every
// key is decided once, exactly, by the store.
func TestBatchSendsOtherNodesKeysTheirWay(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	s, err := New(Config{Addrs: c.Addrs(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	p := &limit.Policy{Limit: 10, Rate: 1, Period: time.Hour}
	pa, err := s.policyArgs(p)
	if err != nil {
		t.Fatal(err)
	}
	first := c.Primaries()[0].Addr
	const n = 24
	take := func(round int) {
		items := make([]item, n)
		live := make([]*item, n)
		for i := range items {
			it := &items[i]
			it.idx, it.key, it.script, it.pa = i, Key("stale:"+strconv.Itoa(i)), pa.script, pa
			it.cost, it.op = 1, limit.OpTake
			it.addr = first // as if every key were the first primary's
			live[i] = it
		}
		out := make([]limit.Result, n)
		s.rounds(ctx, live, out)
		for i, r := range out {
			if r.Err != nil || !r.Allowed || r.DecidedBy != limit.ByStore || r.Remaining != int64(10-round) {
				t.Fatalf("round %d key %d: %+v, want allowed by the store with %d left", round, i, r, 10-round)
			}
		}
	}
	_, _, d0 := allTotals(s)
	take(1)
	take(2)
	p1, c1, d1 := allTotals(s)
	if d1-d0 != 2*n {
		t.Fatalf("%d keys decided, want %d", d1-d0, 2*n)
	}
	var owned int
	for i := range n {
		owner, err := c.PrimaryForKey(ctx, Key("stale:"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		if owner.Addr == first {
			owned++
		}
	}
	if owned == 0 || owned == n {
		t.Fatalf("%d of %d keys on %s: the test needs both kinds", owned, n, first)
	}
	t.Logf("%d keys, %d of them the first primary's: %d script calls in %d pipelines", n, owned, c1, p1)
}

// The error replies that mean a node cannot run the batch script at all
// (from Redis 6.2, which has no script flags, and 7.x refusing a flag), and
// some that do not. Redis 6 cannot run here, so its text is written out.
func TestUnsupported(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{"ERR Error compiling script (new function): user_script:1: unexpected symbol near '#'", true},
		{"ERR Unexpected flag in script shebang: allow-cross-slot-keys", true},
		{"READONLY You can't write against a read only replica.", false},
		{"CLUSTERDOWN The cluster is down", false},
		{"ERR Error running script (call to f_x): @user_script:12: user_script:12: bad argument", false},
	} {
		if got := unsupported(redisErr(tc.msg)); got != tc.want {
			t.Errorf("unsupported(%q) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}
