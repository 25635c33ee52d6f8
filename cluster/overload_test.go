package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// A node that keeps answering while sluice's queue to it is deep is slow,
// not dead: its breaker stays closed, and what cannot be served in time is
// turned away at the door as overloaded, not timed out as unavailable.
// The overload is real: a side client keeps the node busy with DEBUG
// SLEEP 4 ms after 4 ms, so it answers in bursts, and 200 callers with a
// 30 ms deadline each ask more than it can serve.
//
// How much is turned away, and how much of it runs out of time in the
// queue rather than at the door, depends on the machine: a busy CPU moves
// those shares. What may not move is the judgement. A node counts as
// alive while it answered within the breaker's cool-down (late), so an
// unavailable decision is a misjudgement when, before the call began, the
// test had seen the store answer a call that began within the cool-down
// before this one ended: that answer came in that window.
func TestSlowNodeIsNotDead(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	ctx := t.Context()
	// MaxTimeout as the server sets it (app: the largest deadline a config
	// may raise the timeout to, 10s): the breaker's PING then waits the
	// whole cool-down, as it does in sluice. With the package's default
	// (MaxTimeout = Timeout) the PING waits one 30 ms timeout, and a
	// sluice that cannot even write or connect within 30 ms, a few times
	// running, takes the node for dead: a configuration no server runs.
	s, err := New(Config{URL: "redis://" + n.Addr, Timeout: 30 * time.Millisecond, MaxTimeout: 10 * time.Second, MaxBatch: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := &limit.Policy{Name: "p", Limit: 1_000_000, Rate: 1_000_000, Period: time.Second}

	side := redis.NewClient(&redis.Options{Addr: n.Addr})
	defer side.Close()
	stop := make(chan struct{})
	var sleeper sync.WaitGroup
	sleeper.Add(1)
	go func() {
		defer sleeper.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := side.Do(ctx, "debug", "sleep", "0.004").Err(); err != nil && ctx.Err() == nil {
				t.Errorf("DEBUG SLEEP: %v", err)
				return
			}
		}
	}()

	const callers, perCaller = 200, 150
	var stored, overloaded, unavailable, misjudged, other atomic.Int64
	var firstOther atomic.Value
	// samples are the first misjudged decisions, for the report: which
	// error, when in the run, how long the call took, and how long before
	// its end the answer seen had begun.
	var samplesMu sync.Mutex
	var samples []string
	// seen is the latest start (unix ns) of a call the store answered
	// that has returned.
	var seen atomic.Int64
	cooldown := s.cfg.BreakerCooldown
	var wg sync.WaitGroup
	began := time.Now()
	end := began.Add(3 * time.Second) // bounds the load loop
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqs := []limit.Request{{Key: fmt.Sprintf("slow:%d", c), Cost: 1, Policy: p}}
			out := make([]limit.Result, 1)
			for i := 0; i < perCaller && time.Now().Before(end); i++ {
				answeredBefore := seen.Load()
				start := time.Now().UnixNano()
				rctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
				s.Do(rctx, reqs, out)
				cancel()
				switch err := out[0].Err; {
				case err == nil:
					stored.Add(1)
					for old := seen.Load(); start > old && !seen.CompareAndSwap(old, start); old = seen.Load() {
					}
				case errors.Is(err, limit.ErrOverload):
					overloaded.Add(1)
				case errors.Is(err, limit.ErrUnavailable):
					unavailable.Add(1)
					if now := time.Now(); answeredBefore >= now.Add(-cooldown).UnixNano() {
						misjudged.Add(1)
						samplesMu.Lock()
						if len(samples) < 5 {
							samples = append(samples, fmt.Sprintf("at %v: %v (the call took %v; the answer seen began %v before its end)",
								time.Unix(0, start).Sub(began).Round(time.Microsecond), err, now.Sub(time.Unix(0, start)).Round(time.Microsecond),
								now.Sub(time.Unix(0, answeredBefore)).Round(time.Microsecond)))
						}
						samplesMu.Unlock()
					}
				default:
					other.Add(1)
					firstOther.CompareAndSwap(nil, err.Error())
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	sleeper.Wait()

	opens := s.breaker(n.Addr).opens.Load()
	for _, st := range s.Stats() {
		opens = max(opens, st.BreakerOpens)
		t.Logf("node %s: %d pipelines, %d decisions, %d overloaded, %d reads late with the reply waiting; service %v a pipeline + %v a decision",
			st.Addr, st.Pipelines, st.Decisions, st.Overload, st.LateReads, st.PipelineCost, st.Service)
	}
	total := stored.Load() + overloaded.Load() + unavailable.Load() + other.Load()
	t.Logf("%d decisions: %d by the store, %d overloaded, %d unavailable (%d of them while the node answered), %d other (first: %v); breaker opened %d times",
		total, stored.Load(), overloaded.Load(), unavailable.Load(), misjudged.Load(), other.Load(), firstOther.Load(), opens)
	if opens != 0 {
		t.Errorf("the breaker of a node that kept answering opened %d times, want 0", opens)
	}
	if other.Load() != 0 {
		t.Errorf("%d error replies, want 0", other.Load())
	}
	if stored.Load() == 0 || overloaded.Load() == 0 {
		t.Errorf("by the store %d, overloaded %d: want both > 0 (the test must overload a live node)", stored.Load(), overloaded.Load())
	}
	if m := misjudged.Load(); m != 0 {
		t.Errorf("%d of %d decisions unavailable while the node answered within the cool-down (%v): a timeout taken for a fault, want 0; the first: %v", m, total, cooldown, samples)
	}
}

// A request whose deadline passes while it waits in the queue of a node
// that keeps answering was never sent: it is overloaded, whoever judges
// it first — its waiter (late) or the node's worker, which reaches it
// before its waiter wakes when sluice's goroutines wait for a CPU. It is
// unavailable only while nothing says the node is alive, and it is
// counted once however many judge it.
func TestExpiredInQueueIsOverload(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	ctx := t.Context()
	s, err := New(Config{URL: "redis://" + n.Addr, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := &limit.Policy{Name: "p", Limit: 10, Rate: 1, Period: time.Hour}
	pa, err := s.policyArgs(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.queue(n.Addr)
	if err != nil {
		t.Fatal(err)
	}
	// expired is a unit queued for the node whose deadline has passed.
	expired := func() *unit {
		uctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Millisecond))
		t.Cleanup(cancel)
		it := &item{key: Key("expired"), script: pa.script, pa: pa, cost: 1, op: limit.OpTake, addr: n.Addr}
		return &unit{addr: n.Addr, ctx: uctx, items: []*item{it}, done: make(chan struct{}), q: q, queued: time.Now().UnixNano()}
	}

	u := expired()
	q.send([]*unit{u}, new(link)) // expired: nothing is sent
	if err := u.items[0].res.Err; !errors.Is(err, limit.ErrUnavailable) || errors.Is(err, limit.ErrOverload) {
		t.Fatalf("before the node ever answered: %v, want unavailable, not overload", err)
	}

	out := make([]limit.Result, 1)
	if s.Do(ctx, []limit.Request{{Key: "alive", Cost: 1, Policy: p}}, out); out[0].Err != nil {
		t.Fatal(out[0].Err)
	}
	before := q.overloads.Load()
	u = expired()
	q.send([]*unit{u}, new(link)) // expired: nothing is sent
	if err := u.items[0].res.Err; !errors.Is(err, limit.ErrOverload) {
		t.Fatalf("while the node answers: %v, want overload", err)
	}
	if err := s.late(u, u.ctx.Err()); !errors.Is(err, limit.ErrOverload) {
		t.Fatalf("its waiter's answer: %v, want overload", err)
	}
	if got := q.overloads.Load() - before; got != 1 {
		t.Errorf("counted %d times as overloaded, want once", got)
	}

	// Neither was sent: the bucket is untouched.
	if s.Do(ctx, []limit.Request{{Key: "expired", Cost: 1, Policy: p}}, out); out[0].Err != nil || out[0].Remaining != 9 {
		t.Errorf("first take of the expired key: %+v, want allowed with 9 left", out[0])
	}
}

// A request whose deadline passes between two passes of its pipeline —
// the node answered NOSCRIPT (a restarted node, SCRIPT FLUSH), and before
// the EVAL goes the request has run out of time, or its worker got no CPU
// until then — was never run: it is overloaded, as if it had expired in
// the queue, not unavailable, whoever judges it first, and counted once.
func TestExpiredBetweenPassesIsOverload(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	ctx := t.Context()
	obs := &noScriptStall{}
	s, err := New(Config{URL: "redis://" + n.Addr, Timeout: time.Second, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := &limit.Policy{Name: "p", Limit: 10, Rate: 1, Period: time.Hour}
	out := make([]limit.Result, 1)
	if s.Do(ctx, []limit.Request{{Key: "warm", Cost: 1, Policy: p}}, out); out[0].Err != nil {
		t.Fatal(out[0].Err)
	}
	if err := s.single.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	pa, err := s.policyArgs(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.queue(n.Addr)
	if err != nil {
		t.Fatal(err)
	}
	uctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	it := &item{key: Key("between"), script: pa.script, pa: pa, cost: 1, op: limit.OpTake, addr: n.Addr}
	u := &unit{addr: n.Addr, ctx: uctx, items: []*item{it}, done: make(chan struct{}), q: q, queued: time.Now().UnixNano()}
	obs.until.Store(&uctx)

	before := q.overloads.Load()
	q.send([]*unit{u}, new(link)) // NOSCRIPT; the deadline passes before the EVAL
	if err := it.res.Err; !errors.Is(err, limit.ErrOverload) {
		t.Errorf("run out of time after NOSCRIPT: %v, want overload", err)
	}
	if err := s.late(u, uctx.Err()); !errors.Is(err, limit.ErrOverload) {
		t.Errorf("its waiter's answer: %v, want overload", err)
	}
	if got := q.overloads.Load() - before; got != 1 {
		t.Errorf("counted %d times as overloaded, want once", got)
	}
	obs.until.Store(nil)
	// It never ran: the bucket is untouched.
	if s.Do(ctx, []limit.Request{{Key: "between", Cost: 1, Policy: p}}, out); out[0].Err != nil || out[0].Remaining != 9 {
		t.Errorf("first take of the key: %+v, want allowed with 9 left", out[0])
	}
}

// noScriptStall is an Observer that, when told of NOSCRIPT, holds its
// worker until the context in until ends: the worker loses its CPU between
// the node's NOSCRIPT and the EVAL that follows.
type noScriptStall struct {
	until atomic.Pointer[context.Context]
}

func (o *noScriptStall) Pipeline(string, time.Duration, int) {}

func (o *noScriptStall) Error(_, kind string) {
	if c := o.until.Load(); c != nil && kind == KindNoScript {
		<-(*c).Done()
	}
}
