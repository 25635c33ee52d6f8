package cluster

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// headCounts are how a store's units went out, summed over its nodes.
type headCounts struct {
	inline, headSent, handedOff, passengers, queued int64
}

func countsOf(s *Store) headCounts {
	var c headCounts
	s.queues.Range(func(_, v any) bool {
		q := v.(*nodeQueue)
		c.inline += q.inline.Load()
		c.headSent += q.headSent.Load()
		c.handedOff += q.handedOff.Load()
		c.passengers += q.passengers.Load()
		c.queued += q.queuedUnits.Load()
		return true
	})
	return c
}

// busyNode is a single node with one pipeline slot, kept busy by a slow
// command (spinScript, ms milliseconds) in flight from a caller of its own;
// it returns the store, its base pipeline count, and a wait for the busy
// caller.
func busyNode(t *testing.T, ms int) (*Store, *limit.Policy, *limit.Policy, *sync.WaitGroup) {
	t.Helper()
	n := redistest.NewSingle(t)
	s, err := New(Config{URL: "redis://" + n.Addr, Timeout: 10 * time.Second, Pipelines: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	slow := &limit.Policy{Limit: 1, Rate: 1, Period: time.Hour}
	withScript(s, slow, testScript("spin", spinScript), ms)
	warm := &limit.Policy{Limit: 1, Rate: 1, Period: time.Hour}
	withScript(s, warm, testScript("spin", spinScript), 1)
	p := &limit.Policy{Limit: 1000, Rate: 1, Period: time.Hour}
	for _, w := range []*limit.Policy{warm, p} { // load the scripts
		if r := takeN(ctx, s, w, "warm")[0]; r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for _, r := range takeN(ctx, s, p, "warm:1", "warm:2", "warm:3", "warm:4") { // and the batch script
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	p0, _ := totals(s)
	var wg sync.WaitGroup
	wg.Go(func() { takeN(ctx, s, slow, "busy") })
	waitUntil(t, 5*time.Second, "the slow pipeline never went out", func() bool { p, _ := totals(s); return p == p0+1 })
	return s, slow, p, &wg
}

// At pipeline 1 a node's slots are nearly always busy. The first caller
// to find them so, with nothing queued, heads the queue: it waits for the
// slot and sends the pipeline itself, with the requests that came
// meanwhile; none of them waits for a worker. Here the node's one slot is
// busy for 300 ms, a caller heads the queue, ten more board its seat: one
// pipeline of eleven, sent by the head.
func TestHeadOfQueueSendsThePipeline(t *testing.T) {
	t.Parallel()
	s, _, p, wg := busyNode(t, 300)
	ctx := t.Context()
	before := countsOf(s)
	p0, _ := totals(s)

	const riders = 10
	out := make([]limit.Result, 1+riders)
	do := func(i int) {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		s.Do(rctx, []limit.Request{{Key: "head:" + strconv.Itoa(i), Cost: 1, Policy: p}}, out[i:i+1])
	}
	wg.Go(func() { do(0) })
	waitUntil(t, 5*time.Second, "no caller headed the queue", func() bool { return queued(s) == 1 })
	for i := 1; i <= riders; i++ {
		wg.Go(func() { do(i) })
		waitUntil(t, 5*time.Second, "a rider never queued", func() bool { return queued(s) == 1+i })
	}
	if p, _ := totals(s); p != p0 {
		t.Fatalf("%d pipelines went out while the slot was busy; the test needs them queued", p-p0)
	}
	wg.Wait()

	got := countsOf(s)
	got = headCounts{got.inline - before.inline, got.headSent - before.headSent, got.handedOff - before.handedOff,
		got.passengers - before.passengers, got.queued - before.queued}
	p1, _ := totals(s)
	t.Logf("one head and %d riders behind a busy slot: %d pipeline(s); sent by their caller: %d pipelines (%d handed off), %d passengers, %d queued for a worker",
		riders, p1-p0, got.headSent, got.handedOff, got.passengers, got.queued)
	for i, r := range out {
		if r.Err != nil || r.DecidedBy != limit.ByStore || !r.Allowed {
			t.Errorf("request %d: %+v, want the store's admission", i, r)
		}
	}
	if want := (headCounts{headSent: 1, passengers: riders}); got != want {
		t.Errorf("got %+v, want %+v: the head sends itself and its riders", got, want)
	}
	if p1-p0 != 1 {
		t.Errorf("%d pipelines, want 1", p1-p0)
	}
}

// The deadline rule: a caller that heads the queue does not send a
// pipeline that would hold it past its own deadline. Here the head has
// 2.5 s, the slot frees after 1 s, and a request with 20 s left that runs
// for 2 s (a slow command) boards its seat: sending that pipeline itself
// would hold the head until the slow command's reply, at 3 s, or its
// deadline, at 20 s. It hands the pipeline to a goroutine instead and is
// answered at its own deadline: overloaded, since the node kept answering;
// the slow request gets the store's answer.
func TestHeadIsNotHeldPastItsDeadline(t *testing.T) {
	t.Parallel()
	s, slow, p, wg := busyNode(t, 1000)
	withScript(s, slow, testScript("spin", spinScript), 2000)
	ctx := t.Context()
	before := countsOf(s)

	var head, rider []limit.Result
	var took time.Duration
	wg.Go(func() {
		hctx, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
		defer cancel()
		start := time.Now()
		head = takeN(hctx, s, p, "near")
		took = time.Since(start)
	})
	waitUntil(t, 5*time.Second, "no caller headed the queue", func() bool { return queued(s) == 1 })
	wg.Go(func() {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		rider = takeN(rctx, s, slow, "slow")
	})
	waitUntil(t, 5*time.Second, "the slow request never boarded", func() bool { return queued(s) == 2 })
	wg.Wait()

	got := countsOf(s)
	t.Logf("head with 2.5s left, a 2s command with 20s left behind it: head %v after %v; rider %+v; head pipelines %d, handed off %d",
		head[0].Err, took.Round(time.Millisecond), rider[0], got.headSent-before.headSent, got.handedOff-before.handedOff)
	if !errors.Is(head[0].Err, limit.ErrOverload) {
		t.Errorf("the head: %+v; want overloaded at its own deadline, not held for the pipeline it headed", head[0])
	}
	if rider[0].Err != nil || rider[0].DecidedBy != limit.ByStore {
		t.Errorf("the rider: %+v, want the store's answer", rider[0])
	}
	if got.headSent-before.headSent != 1 || got.handedOff-before.handedOff != 1 {
		t.Errorf("head pipelines %d, handed off %d; want 1 and 1", got.headSent-before.headSent, got.handedOff-before.handedOff)
	}
}
