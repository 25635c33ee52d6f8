package rls

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/policy"
)

// gateDecider records the size of every Decide call; while gate is open
// (not nil), the first Decide waits for it to close.
type gateDecider struct {
	Decider
	mu    sync.Mutex
	sizes []int
	gate  chan struct{}
}

func (d *gateDecider) Decide(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	d.mu.Lock()
	d.sizes = append(d.sizes, len(reqs))
	g := d.gate
	d.gate = nil
	d.mu.Unlock()
	if g != nil {
		<-g
	}
	d.Decider.Decide(ctx, reqs, out)
}

func (d *gateDecider) calls() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]int(nil), d.sizes...)
}

// pollUntil polls cond until it holds, failing the test after a minute.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// Calls that come while a Decide is in flight share the next one, and
// each gets its own decisions from the store; a lone call goes alone.
func TestCollectorJoinsConcurrentCalls(t *testing.T) {
	c := redistest.NewCluster(t, localredis.Config{Replicas: -1})
	set, err := policy.Parse([]byte("policies:\n  - {name: p, match: \"*\", limit: 10, rate: 10, period: 1h, on_store_error: closed}\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	store, err := cluster.New(cluster.Config{Addrs: c.Addrs(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	lim, err := limiter.New(limiter.Config{Policies: set, Store: store, Timeout: func() time.Duration { return 5 * time.Second }})
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	d := &gateDecider{Decider: lim, gate: gate}
	col := newCollector(d)
	col.maxWait = time.Hour // the batch goes when the first call returns, not before
	take := func(key string, cost int64) limit.Result {
		reqs := []limit.Request{{Key: key, Cost: cost, Op: limit.OpTake, Policy: set.Match(key)}}
		out := make([]limit.Result, 1)
		col.Decide(t.Context(), reqs, out)
		return out[0]
	}

	first := make(chan limit.Result)
	go func() { first <- take("first", 1) }()
	pollUntil(t, "the first call to reach the Decider", func() bool { return len(d.calls()) == 1 })
	const n = 7
	results := make([]limit.Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i] = take(fmt.Sprintf("k%d", i), int64(i+1)) })
	}
	pollUntil(t, "every call to gather", func() bool { return col.waiting() == n })
	close(gate)
	if r := <-first; !r.Allowed || r.Remaining != 9 {
		t.Errorf("first call %+v, want admitted with 9 left", r)
	}
	wg.Wait()
	for i, r := range results {
		if r.Err != nil || !r.Allowed || r.Remaining != int64(10-(i+1)) || r.DecidedBy != limit.ByStore {
			t.Errorf("call %d (cost %d): %+v, want admitted by the store with %d left", i, i+1, r, 10-(i+1))
		}
	}
	if got := d.calls(); len(got) != 2 || got[0] != 1 || got[1] != n {
		t.Errorf("Decide calls of sizes %v, want [1 %d]: the first alone, the rest in one batch", got, n)
	}
	if dec, joined := col.decides.Load(), col.joined.Load(); dec != 2 || joined != n {
		t.Errorf("%d Decide calls, %d calls joined; want 2 and %d", dec, joined, n)
	}
	// Alone again: no batch gathers, nothing waits.
	if r := take("alone", 2); !r.Allowed || r.Remaining != 8 {
		t.Errorf("lone call %+v, want admitted with 8 left", r)
	}
	if got := d.calls(); len(got) != 3 || got[2] != 1 {
		t.Errorf("Decide calls of sizes %v, want a third of 1", got)
	}
	if j := col.joined.Load(); j != n {
		t.Errorf("%d calls joined after a lone one, want still %d", j, n)
	}
}

// panicDecider panics in every Decide after the first, which waits for
// gate.
type panicDecider struct {
	fixedDecider
	gate    chan struct{}
	entered chan struct{}
}

type fixedDecider struct{}

func (fixedDecider) Decide(_ context.Context, reqs []limit.Request, out []limit.Result) {
	for i := range out {
		out[i] = limit.Result{Allowed: true, DecidedBy: limit.ByStore}
	}
}

func (fixedDecider) MTake(context.Context, []limit.Request, []limit.Result) (bool, error) {
	return true, nil
}

func (d *panicDecider) Decide(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	select {
	case d.entered <- struct{}{}:
		<-d.gate
		d.fixedDecider.Decide(ctx, reqs, out)
	default:
		panic("boom")
	}
}

// A Decider that panics on a batch makes every call of it panic (the
// door's interceptor answers each Internal); none is left waiting, and
// the collector serves the next call.
func TestCollectorPanicReachesEveryCall(t *testing.T) {
	d := &panicDecider{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	col := newCollector(d)
	col.maxWait = time.Hour
	call := func() (panicked any) {
		defer func() { panicked = recover() }()
		col.Decide(t.Context(), make([]limit.Request, 1), make([]limit.Result, 1))
		return nil
	}
	first := make(chan any)
	go func() { first <- call() }()
	pollUntil(t, "the first call to reach the Decider", func() bool { return len(d.entered) == 1 })
	const n = 3
	panics := make([]any, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { panics[i] = call() })
	}
	pollUntil(t, "every call to gather", func() bool { return col.waiting() == n })
	close(d.gate)
	if p := <-first; p != nil {
		t.Errorf("the first call panicked: %v", p)
	}
	wg.Wait()
	for i, p := range panics {
		if p != "boom" {
			t.Errorf("call %d of the batch: panic %v, want boom", i, p)
		}
	}
	if p := call(); p != "boom" {
		t.Errorf("the next call: panic %v, want boom (it reached the Decider)", p)
	}
}

// A gathered batch does not wait for a Decide stuck in flight past
// maxWait: it goes beside it.
func TestCollectorDoesNotWaitForAStuckDecide(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	d := &gateDecider{Decider: fixedDecider{}, gate: gate}
	col := newCollector(d)
	stuck := make(chan struct{})
	go func() {
		defer close(stuck)
		col.Decide(context.Background(), make([]limit.Request, 1), make([]limit.Result, 1))
	}()
	pollUntil(t, "the first call to reach the Decider", func() bool { return len(d.calls()) == 1 })
	out := make([]limit.Result, 2)
	second := make(chan struct{})
	go func() {
		defer close(second)
		col.Decide(context.Background(), make([]limit.Request, 2), out)
	}()
	pollUntil(t, "the second call to return while the first is stuck", func() bool {
		select {
		case <-second:
			return true
		default:
			return false
		}
	})
	if !out[0].Allowed || !out[1].Allowed {
		t.Errorf("results %+v, want both decided", out)
	}
	select {
	case <-stuck:
		t.Fatal("the first call returned: it was not stuck")
	default:
	}
	if got, early := d.calls(), col.early.Load(); len(got) != 2 || got[1] != 2 || early != 1 {
		t.Errorf("Decide calls of sizes %v, %d early; want [1 2] and 1", got, early)
	}
}
