package rls

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// The RESP door hands the limiter every RL.TAKE of a pipeline in one
// Decide call; a gRPC call carries one descriptor or a few, and each call
// used to make its own Decide. The collector joins the Decide calls of
// concurrent gRPC calls the way a group commit joins transactions: a call
// that finds fewer than max batches being decided goes at once, alone,
// with nothing copied; one that finds them all busy joins the batch that
// gathers meanwhile, which goes as soon as a batch in flight returns. A
// lone call so waits for nothing, and a busy door sends fewer, larger
// Decide calls (one per node pipeline in the store instead of one per
// call), the more requests per batch the busier it is.
//
// A gathered batch waits for a slot at most collectMaxWait: past it, it
// goes anyway, one more in flight, so a Decide stuck on a slow node holds
// the calls that came after it that long, not until its store timeout.
// (The calls of one batch still wait for its slowest node, as the
// commands of one RESP pipeline do.)
//
// A batch is decided with its first call's context, its cancellation
// dropped: the limiter bounds every decision by its own store timeout and
// reads only values (the door) from it, the same for every call here.
// MTake (all-or-nothing across the descriptors of one call) never joins a
// batch.

// Defaults of the collector.
const (
	// collectInFlight is the batches decided at once before calls gather.
	collectInFlight = 1
	// collectMaxBatch bounds the requests of one gathered batch; a call
	// that finds the gathering batch full goes alone, as it would without
	// the collector.
	collectMaxBatch = 256
	// collectMaxWait bounds the wait of a gathered batch for its slot.
	collectMaxWait = 10 * time.Millisecond
)

// collector joins the Decide calls of concurrent callers; safe for
// concurrent use.
type collector struct {
	d        Decider
	max      int // batches in flight before calls gather
	maxBatch int
	maxWait  time.Duration

	mu       sync.Mutex
	inFlight int    // batches (or lone calls) being decided
	next     *batch // the batch gathering, nil when none

	// decides counts the Decide calls made, joined the calls that went in
	// a batch with another's (each counted once), early the batches that
	// went before a slot was free (collectMaxWait).
	decides, joined, early atomic.Int64
	// traced: a call that joins another's batch links its span to that
	// call's, whose span the batch's sluice.decide is a child of (trace.go).
	traced bool
}

// batch is the requests of the calls gathered while every slot was busy.
type batch struct {
	ctx   context.Context
	reqs  []limit.Request
	out   []limit.Result
	calls int
	turn  chan struct{} // closed when the batch may go: its leader sends it
	done  chan struct{} // closed when out is filled (or the Decider panicked)
	// panicked is what the Decider panicked with, for every call of the
	// batch to panic with (the door's interceptor answers Internal).
	panicked any
}

func newCollector(d Decider) *collector {
	return &collector{d: d, max: collectInFlight, maxBatch: collectMaxBatch, maxWait: collectMaxWait}
}

// Decide decides reqs into out, alone when a slot is free, else in the
// batch that gathers.
func (c *collector) Decide(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	c.mu.Lock()
	if c.inFlight < c.max || (c.next != nil && len(c.next.reqs)+len(reqs) > c.maxBatch) {
		c.inFlight++
		c.mu.Unlock()
		c.decides.Add(1)
		defer c.release()
		c.d.Decide(ctx, reqs, out)
		return
	}
	b := c.next
	lead := b == nil
	if lead {
		b = &batch{ctx: context.WithoutCancel(ctx), turn: make(chan struct{}), done: make(chan struct{})}
		c.next = b
	}
	from := len(b.reqs)
	b.reqs = append(b.reqs, reqs...)
	b.calls++
	c.mu.Unlock()
	if c.traced && !lead {
		linkJoined(ctx, b.ctx)
	}
	if lead {
		c.await(b)
		c.send(b)
	} else {
		<-b.done
	}
	if b.panicked != nil {
		panic(b.panicked)
	}
	copy(out, b.out[from:from+len(reqs)])
}

// await waits until the gathered batch b may go: its turn (a slot handed
// over by release), or maxWait, when b takes a slot of its own.
func (c *collector) await(b *batch) {
	t := time.NewTimer(c.maxWait)
	defer t.Stop()
	select {
	case <-b.turn:
		return
	case <-t.C:
	}
	c.mu.Lock()
	if c.next == b { // not handed a slot meanwhile: take one
		c.next = nil
		c.inFlight++
		c.early.Add(1)
	}
	c.mu.Unlock()
}

// send decides the batch b, whose turn has come (its slot counted), and
// wakes its calls.
func (c *collector) send(b *batch) {
	defer c.release()
	defer close(b.done)
	defer func() {
		if r := recover(); r != nil {
			b.panicked = r
		}
	}()
	c.decides.Add(1)
	if b.calls > 1 {
		c.joined.Add(int64(b.calls))
	}
	b.out = make([]limit.Result, len(b.reqs))
	c.d.Decide(b.ctx, b.reqs, b.out)
}

// release gives back the slot of a batch or lone call that has been
// decided: to the batch that gathered meanwhile, when there is one.
func (c *collector) release() {
	c.mu.Lock()
	b := c.next
	if b != nil {
		c.next = nil // the slot passes to b: inFlight stays
	} else {
		c.inFlight--
	}
	c.mu.Unlock()
	if b != nil {
		close(b.turn)
	}
}

// waiting is the calls gathered in the batch not yet sent.
func (c *collector) waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next == nil {
		return 0
	}
	return c.next.calls
}
