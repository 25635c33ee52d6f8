package region

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/policy"
)

// TestScopeChangeEmptiesOnEveryInstance: two instances of one region,
// gl (10 + 5/s) global and spent on l1 alone, then a set that makes it
// regional. l2, which never saw the key, empties its regional bucket at
// its first regional request, once (a second later it admits the refill),
// and a key of gl taken only after the window (refill + horizon + 1 s) is
// not emptied: its bucket starts full. The markers and the change are
// forgotten once the window ends. Before: l2 admitted 10 from the full
// regional bucket beside what l1's pool had admitted.
func TestScopeChangeEmptiesOnEveryInstance(t *testing.T) {
	t.Parallel()
	homeNode, regionalNode := redistest.NewSingle(t), redistest.NewSingle(t)
	home, err := cluster.New(cluster.Config{URL: "redis://" + homeNode.Addr, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { home.Close() })
	store, err := cluster.New(cluster.Config{URL: "redis://" + regionalNode.Addr, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	gl := &limit.Policy{Name: "gl", Match: "gl.*", Algorithm: limit.TokenBucket, Limit: 10, Rate: 5, Period: time.Second,
		OnStoreError: limit.FailClosed, Scope: limit.ScopeGlobal, RegionFloor: 0.2}
	regional := *gl
	regional.Scope = limit.ScopeRegional
	global, err := policy.NewSet(0, gl)
	if err != nil {
		t.Fatal(err)
	}
	regionalSet, err := policy.NewSet(0, &regional)
	if err != nil {
		t.Fatal(err)
	}
	var cur atomic.Pointer[policy.Set]
	cur.Store(global)
	var ls []*Layer
	for _, name := range []string{"1", "2"} {
		l, err := New(store, Config{Region: "eu", Instance: name, Home: home, Tick: 50 * time.Millisecond, HomeTimeout: 300 * time.Millisecond,
			Match: func(k string) *limit.Policy { return cur.Load().Match(k) }, Policies: func() PolicySet { return cur.Load() }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ls = append(ls, l)
	}
	ctx := context.Background()
	takes := func(l *Layer, key string, n int) (admitted int) {
		for range n {
			out := make([]limit.Result, 1)
			l.Store().Do(ctx, []limit.Request{{Key: key, Cost: 1, Op: limit.OpTake, Policy: cur.Load().Match(key)}}, out)
			if out[0].Err != nil {
				t.Fatal(out[0].Err)
			}
			if out[0].Allowed {
				admitted++
			}
		}
		return admitted
	}
	spent := 0
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; time.Sleep(5 * time.Millisecond) {
		spent += takes(ls[0], "gl.a", 1)
	}
	cur.Store(regionalSet)
	start := time.Now()
	if n := takes(ls[1], "gl.a", 20); n > 1 {
		t.Errorf("l2, after gl became regional: admitted %d of 20 beside the %d the global budget admitted on l1, want at most 1", n, spent)
	}
	time.Sleep(time.Second) // rounds pass: l2's marker stays, the bucket is not emptied again
	if n := takes(ls[1], "gl.a", 10); n < 4 || n > 6 {
		t.Errorf("l2, 1 s later: admitted %d of 10, want the refill, 5", n)
	}
	window := time.Duration(ls[1].window(gl))
	time.Sleep(window - time.Since(start) + 200*time.Millisecond)
	if n := takes(ls[1], "gl.b", 12); n != 10 {
		t.Errorf("a key of gl first taken after the window: admitted %d of 12, want the full bucket, 10", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, l := range ls {
		for l.nkeys.Load() != 0 || l.changesUntil.Load() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("after the window: %d keys tracked, changes until %d, want none", l.nkeys.Load(), l.changesUntil.Load())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if s := ls[0].Snapshot(); s.Retired != 1 {
		t.Errorf("l1 retired %d keys, want 1", s.Retired)
	}
}

// TestScopeFlipsBackAndForth: a key made regional, then global, then
// regional again within one window is a new entry when global again (it
// owes home what its regional bucket spent) and has its regional bucket
// emptied at each change to regional, not only at the first.
func TestScopeFlipsBackAndForth(t *testing.T) {
	t.Parallel()
	homeNode, regionalNode := redistest.NewSingle(t), redistest.NewSingle(t)
	home, err := cluster.New(cluster.Config{URL: "redis://" + homeNode.Addr, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { home.Close() })
	store, err := cluster.New(cluster.Config{URL: "redis://" + regionalNode.Addr, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	gl := &limit.Policy{Name: "gl", Match: "gl.*", Algorithm: limit.TokenBucket, Limit: 10, Rate: 1, Period: time.Minute,
		OnStoreError: limit.FailClosed, Scope: limit.ScopeGlobal, RegionFloor: 0.2}
	regional := *gl
	regional.Scope = limit.ScopeRegional
	var cur atomic.Pointer[policy.Set]
	set := func(p *limit.Policy) {
		s, err := policy.NewSet(0, p)
		if err != nil {
			t.Fatal(err)
		}
		cur.Store(s)
	}
	set(gl)
	l, err := New(store, Config{Region: "eu", Home: home, Tick: 50 * time.Millisecond, HomeTimeout: 300 * time.Millisecond,
		Match: func(k string) *limit.Policy { return cur.Load().Match(k) }, Policies: func() PolicySet { return cur.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ctx := context.Background()
	take := func() limit.Result {
		out := make([]limit.Result, 1)
		l.Store().Do(ctx, []limit.Request{{Key: "gl.a", Cost: 1, Op: limit.OpTake, Policy: cur.Load().Match("gl.a")}}, out)
		if out[0].Err != nil {
			t.Fatal(out[0].Err)
		}
		return out[0]
	}
	take()
	for round := range 2 {
		set(&regional)
		if r := take(); r.Allowed || r.Remaining != 0 {
			t.Fatalf("change %d to regional: %+v, want refused from an emptied bucket", round+1, r)
		}
		v, _ := l.keys.Load("gl.a")
		marker := v.(*entry)
		set(gl)
		take()
		v, _ = l.keys.Load("gl.a")
		if e := v.(*entry); e == marker || e.retired.Load() || e.regional.Load() {
			t.Fatalf("change %d back to global: the entry is the marker of the change to regional", round+1)
		}
	}
}
