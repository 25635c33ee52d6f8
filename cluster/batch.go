package cluster

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/limit"
)

// unit is the items of one Do call that go to one node.
type unit struct {
	addr  string
	ctx   context.Context
	items []*item
	done  chan struct{} // closed by the worker when every item is filed

	// q and queued (unix ns) are set when u goes to its node: for the
	// waiter, to tell an overloaded node from a silent one (Store.late).
	q      *nodeQueue
	queued int64
	// redirected: u goes round again after MOVED or ASK; running out of
	// time then is a redirection loop, not overload.
	redirected bool
	// durable: u's items are spends of durability: replica policies, and
	// its pipeline ends with WAIT; a Do's other items to the same node go
	// in a unit of their own, answered before it (send).
	durable bool
	// judged is set by the first to classify u as run out of time — its
	// waiter (Store.late) or its worker (expired, lateUnit) — so that its
	// decisions are counted once.
	judged atomic.Bool
	// piped is the items of the pipeline u went in, its own and other
	// callers', set by its sender before u is done, when tracing is on.
	piped int
}

// nodeQueue feeds one node's workers. Each worker takes whatever is queued
// when it is free, up to MaxBatch commands, and sends it as one pipeline:
// batching without timers, so an idle node answers a lone request at once
// and a busy one gets fewer, larger pipelines.
//
// A queue belongs to a node address, with a client of its own; when the
// node has left the cluster, the sweep stops its workers and closes the
// client (see queue.go).
type nodeQueue struct {
	s      *Store
	addr   string
	client *redis.Client // s.single for a single node; else the queue's own
	br     *breaker
	ch     chan *unit

	// mu orders submit against stopping: units go into ch under the read
	// lock, and only while stopped is false; stopping sets it under the
	// write lock, so the workers, which drain ch before they exit, see
	// every unit that got in.
	mu      sync.RWMutex
	stopped bool
	stop    chan struct{}
	workers sync.WaitGroup

	// slots bounds the pipelines in flight to the node (Pipelines): a
	// worker takes one before it sends, and so does a caller that finds
	// the node idle and sends its own unit at once, sparing the hand-off
	// to a worker goroutine and back. Each slot is a connection of its
	// own (link), taken with the slot and put back with it.
	slots   chan *link
	waiting atomic.Int64 // units a worker, a head or its seat holds while they wait for a slot
	seats   seats        // the caller at the head of the queue, if any (head.go)

	// How units went out: sent by their own caller to an idle node
	// (inline), or at the head of the queue (headSent pipelines, of which
	// handedOff were handed to a goroutine by the deadline rule), or
	// boarded a head's seat (passengers), or were queued for a worker.
	inline, headSent, handedOff, passengers, queuedUnits atomic.Int64
	// parks counts the waits of the store's own goroutines, each a
	// wake-up later: a worker that found nothing queued or no slot free,
	// a head that found no slot free.
	parks atomic.Int64

	last                           atomic.Int64 // unix ns of the last pipeline sent
	answered                       atomic.Int64 // unix ns of the last pipeline the node answered
	backlog                        atomic.Int64 // decisions queued or in flight
	service                        service      // the node's recent service times, for the door
	batchLimit                     atomic.Int64 // the decisions a worker takes at most for one pipeline (overload.go)
	overloads                      atomic.Int64 // decisions turned away at the door or late while the node answered
	lateReads                      atomic.Int64 // reads that timed out with the node's reply waiting (overload_read.go)
	pipelines, commands, decisions atomic.Int64
	noBatch                        atomic.Bool // the node refused the batch script (no script flags)
	fn                             funcState   // the batch library on the node (function.go)
	// unackedUntil (unix ns) is the end of the node's spell: set when a
	// WAIT was not acknowledged, its pipelines send none until then; spell
	// is the spell's length (ns), doubled by each probe that fails
	// (durable.go).
	unackedUntil, spell atomic.Int64
}

// queue returns the queue of the node at addr, starting it if need be.
func (s *Store) queue(addr string) (*nodeQueue, error) {
	if q, ok := s.queues.Load(addr); ok {
		return q.(*nodeQueue), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if q, ok := s.queues.Load(addr); ok {
		return q.(*nodeQueue), nil
	}
	if s.closed.Load() {
		return nil, ErrClosed
	}
	q := &nodeQueue{s: s, addr: addr, br: s.breakerLocked(addr), ch: make(chan *unit, 4096), stop: make(chan struct{}),
		slots: make(chan *link, s.cfg.Pipelines)}
	for range s.cfg.Pipelines {
		q.slots <- new(link)
	}
	if s.cc == nil {
		q.client = s.single
	} else {
		o := *s.opts
		o.Addr = addr
		q.client = s.newClient(&o)
		s.sweepSoon() // a node not seen before: perhaps another has left
	}
	q.last.Store(time.Now().UnixNano())
	q.batchLimit.Store(int64(min(s.cfg.MaxBatch, 4*minBatchLimit)))
	q.br.setConfirm(q.confirmAlive)
	s.queues.Store(addr, q)
	q.workers.Add(s.cfg.Pipelines)
	for range s.cfg.Pipelines {
		go q.work()
	}
	return q, nil
}

// submit hands u to its node's queue. When inline is set and the node is
// idle — nothing queued and a pipeline slot free — the caller sends u
// itself, here, and u is done when submit returns. When inline is set and
// the node's slots are busy with nothing queued, the caller heads the
// queue: it waits for a slot and sends u with what came meanwhile
// (head.go). Else u boards the head's seat, or is queued for a worker; when
// the queue is full submit waits, at most until u's deadline (the caller
// then answers unavailable).
func (s *Store) submit(u *unit, inline bool) error {
	for {
		q, err := s.queue(u.addr)
		if err != nil {
			return err
		}
		q.mu.RLock()
		if q.stopped { // swept just now: the next lookup starts a new queue
			q.mu.RUnlock()
			continue
		}
		now := time.Now()
		u.q, u.queued = q, now.UnixNano()
		if inline && len(q.ch) == 0 && !q.seatOpen() {
			select {
			case l := <-q.slots:
				// Under the read lock, so that a sweep cannot close the
				// client while this pipeline uses it.
				q.inline.Add(1)
				q.backlog.Add(int64(len(u.items)))
				q.sendOwn(u, []*unit{u}, l, nil)
				q.mu.RUnlock()
				return nil
			default:
			}
		}
		if err := q.admit(u, now); err != nil {
			q.mu.RUnlock()
			return err
		}
		q.backlog.Add(int64(len(u.items)))
		if inline && len(q.ch) == 0 {
			if st, ok := q.lead(u); ok {
				err := q.head(u, st)
				q.mu.RUnlock()
				return err
			}
		}
		if q.board(u) {
			q.mu.RUnlock()
			return nil
		}
		q.queuedUnits.Add(1)
		select {
		case q.ch <- u:
		case <-u.ctx.Done():
			q.backlog.Add(-int64(len(u.items)))
		}
		q.mu.RUnlock()
		return nil
	}
}

func (q *nodeQueue) work() {
	defer q.workers.Done()
	batch := make([]*unit, 0, 64)
	for {
		var u *unit
		if len(q.ch) == 0 {
			q.parks.Add(1)
		}
		select {
		case u = <-q.ch:
		case <-q.s.closing:
			return
		case <-q.stop:
			select {
			case u = <-q.ch: // units that got in before the stop go out
			default:
				return
			}
		}
		// A slot first, then the rest of the queue: what queues while the
		// node's pipelines are busy goes out together.
		q.waiting.Add(1)
		if len(q.slots) == 0 {
			q.parks.Add(1)
		}
		l := <-q.slots
		q.waiting.Add(-1)
		batch = append(batch[:0], u)
		n := len(u.items)
	drain:
		for most := int(q.batchLimit.Load()); n < most; {
			select {
			case u = <-q.ch:
				batch = append(batch, u)
				n += len(u.items)
			default:
				break drain
			}
		}
		q.last.Store(time.Now().UnixNano())
		k := q.send(batch, l)
		q.slots <- l
		for _, u := range batch[k:] {
			q.finish(u)
		}
	}
}

// finish answers u, whose items are filed: its waiter may read them.
func (q *nodeQueue) finish(u *unit) {
	q.backlog.Add(-int64(len(u.items)))
	close(u.done)
}

// send sends the batch on l, the connection of the slot its caller holds:
// when the batch mixes units of durable spends with others, the others
// first, in a pipeline of their own, and they are answered (finished) at
// once, so that WAIT, which a replica's absence makes last most of the
// deadline, holds up none of them. It reorders batch so that the units it
// finished come first, and returns how many: the caller finishes the rest.
func (q *nodeQueue) send(batch []*unit, l *link) int {
	k := 0
	for i, u := range batch {
		if !u.durable {
			batch[i], batch[k] = batch[k], batch[i]
			k++
		}
	}
	if k == 0 || k == len(batch) {
		q.sendNow(batch, l)
		return 0
	}
	q.sendNow(batch[:k], l)
	for _, u := range batch[:k] {
		q.finish(u)
	}
	q.last.Store(time.Now().UnixNano())
	q.sendNow(batch[k:], l)
	return k
}

// sendNow runs one pipeline for the batch: the single-key requests in one call
// of the batch script (lua.Batch) when there are several and the node takes
// it, the others each by its own script. A second pass in the same round
// trip budget follows when the node asked for it: EVAL for a script that
// met NOSCRIPT (a restarted or failed-over node), and the own script of the
// keys the batch script could not serve (another node's, a migrating slot),
// which then follow MOVED and ASK. Units already past their deadline are
// not sent; a unit without one has Timeout. The pipeline waits until the
// latest deadline of the others (MaxTimeout at most), so that a request
// near its end never cuts the time of the fresh ones beside it: a unit
// whose deadline passes in flight is answered unavailable by its own waiter
// (Store.round), the rest get the node's answers, and the breaker hears
// only whether the node answered. It sends on l, the connection of the
// slot its caller holds.
func (q *nodeQueue) sendNow(batch []*unit, l *link) {
	items, latest := q.live(batch)
	if len(items) == 0 {
		return
	}
	if q.s.cfg.Tracer != nil {
		for _, u := range batch {
			u.piped = len(items)
		}
	}
	sent := time.Now()
	if !q.br.allow(sent) {
		q.fail(items, ErrCircuitOpen)
		return
	}
	// A pipeline waits Timeout at least, whatever is left of its requests'
	// time: one that gets no reply in that time is a sign the node is
	// down; one cut short by requests that queued long is not.
	if floor := sent.Add(min(q.s.cfg.Timeout, q.s.cfg.MaxTimeout)); latest.Before(floor) {
		latest = floor
	}
	ctx, cancel := context.WithDeadline(context.Background(), latest)
	defer cancel()
	reached, evalBatch, stalled := q.pipeline(ctx, l, items, false)
	switch {
	case reached && stalled:
		// WAIT ran out of time: the round trip measured the replicas'
		// absence, not the node's speed.
		q.noteAlive(time.Now())
	case reached:
		q.noteAnswer(time.Now(), sent, len(items))
	}
	reached = q.retry(ctx, l, batch, items, reached, evalBatch)
	q.heard(batch, sent, reached)
}

// live returns the items of the batch's units still within their deadline
// (the others are answered expired) and the latest of those deadlines; a
// unit without one has Timeout.
func (q *nodeQueue) live(batch []*unit) (items []*item, latest time.Time) {
	for _, u := range batch {
		if err := u.ctx.Err(); err != nil {
			q.expired(u, err)
			continue
		}
		d, ok := u.ctx.Deadline()
		if !ok {
			d = time.Now().Add(q.s.cfg.Timeout)
		}
		if d.After(latest) {
			latest = d
		}
		for _, it := range u.items {
			it.by = d
		}
		items = append(items, u.items...)
	}
	return items, latest
}

// retry sends again, in up to three more passes, what the node's replies
// asked for again (EVAL after NOSCRIPT, a key's own script where the batch
// script could not serve it), while the node answers. A unit whose
// deadline has passed spends nothing more: what it asked for again never
// ran, so it is answered as if it had expired in the queue (Store.late:
// overloaded while the node answers), the same answer its waiter gives if
// it wakes first. What is left after a pass the node did not answer, or
// after the third, is answered unavailable. It reports whether the node
// answered the last pass.
func (q *nodeQueue) retry(ctx context.Context, l *link, batch []*unit, items []*item, reached, evalBatch bool) bool {
	for pass := 0; pass < 3; pass++ {
		var again []*item
		for _, u := range batch {
			expired := u.ctx.Err()
			var late error // u's answer once expired, judged once
			for _, it := range u.items {
				if !it.eval && !it.again {
					continue
				}
				switch {
				case expired != nil:
					if late == nil {
						late = q.s.late(u, expired)
					}
					it.res = limit.Result{Err: late}
				case reached:
					again = append(again, it)
					continue
				default:
					it.res = limit.Result{Err: &limit.UnavailableError{Node: q.addr, Err: errNoReply}}
				}
				it.eval, it.again = false, false
			}
		}
		if len(again) == 0 {
			break
		}
		reached, evalBatch, _ = q.pipeline(ctx, l, again, evalBatch)
	}
	for _, it := range items { // a fourth pass is not taken: answer what is left
		if it.eval || it.again {
			it.eval, it.again = false, false
			it.res = limit.Result{Err: &limit.UnavailableError{Node: q.addr, Err: errNoReply}}
		}
	}
	return reached
}

// heard tells the breaker and the overload model how the node answered
// the pipeline sent at sent. A node that answered anything while it
// waited is alive: its replies reach sluice late, or this connection broke
// alone. One that did not is a failure for the breaker, which asks the
// node before it opens; meanwhile the timeouts of a node not known to be
// down are overload (lateReplies).
func (q *nodeQueue) heard(batch []*unit, sent time.Time, reached bool) {
	answered := reached || q.answeredSince(sent.UnixNano())
	if !answered {
		q.noteSilence()
	}
	if !reached && q.alive(sent.UnixNano()) {
		q.lateReplies(batch, sent)
	}
	q.br.report(answered, time.Now())
}

// pipeline sends items in one round trip on l and files each reply; it
// reports whether the node answered, and whether the batch call met
// NOSCRIPT or "Function not found" (the next pass sends it by EVAL, or
// after a FUNCTION LOAD; evalBatch says this pass does).
// When the node admitted a durable spend, WAIT follows on l (replicate);
// stalled reports that no replica acknowledged it.
func (q *nodeQueue) pipeline(ctx context.Context, l *link, items []*item, evalBatch bool) (reached, noScript, stalled bool) {
	for _, it := range items {
		it.again = false // sent now; a reply may ask for it again
	}
	sc := getScratch()
	defer putScratch(sc)
	batched, rest := q.split(items, sc)
	q.pipelines.Add(1)
	q.commands.Add(int64(len(rest)))
	var bcmd *redis.IntSliceCmd
	var load *redis.StringCmd // FUNCTION LOAD before an FCALL (function.go)
	fcall := batched != nil && q.useFunc()
	if batched != nil {
		q.commands.Add(1)
		if fcall {
			load = q.loadCmd(ctx, evalBatch)
		}
		bcmd = batchCmd(ctx, batched, fcall, evalBatch, sc)
	}
	sc.cmds = slices.Grow(sc.cmds[:0], len(rest))[:len(rest)]
	cmds := sc.cmds
	start := time.Now()
	err := l.pipelined(ctx, q, load, bcmd, rest, cmds)
	l.check(err, bcmd, cmds)
	if o := q.s.cfg.Observer; o != nil {
		o.Pipeline(q.addr, time.Since(start), len(cmds)+min(1, len(batched)))
	}
	reached = true
	if load != nil {
		q.fileLoad(load)
	}
	if bcmd != nil {
		reached, noScript = q.fileBatch(bcmd, batched, fcall, evalBatch)
	}
	for i, it := range rest {
		if cmds[i].Err() == nil {
			q.decisions.Add(max(1, int64(len(it.multi))))
		}
		sentEval := it.eval
		it.eval = false
		if !q.s.file(it, cmds[i], q.addr) {
			reached = false
		}
		if sentEval && it.eval {
			// NOSCRIPT in reply to EVAL cannot happen; never loop on it.
			it.eval = false
			it.res = limit.Result{Err: errNoScriptTwice}
		}
	}
	stalled = q.replicate(ctx, l, items)
	return reached, noScript, stalled
}

func (q *nodeQueue) fail(items []*item, err error) {
	e := &limit.UnavailableError{Node: q.addr, Err: err}
	for _, it := range items {
		it.res = limit.Result{Err: e}
		q.s.observeErr(q.addr, err)
	}
}

// NodeStats are one node's counters.
type NodeStats struct {
	Addr      string
	Breaker   string // closed, open or half-open
	Pipelines int64  // pipelines sent
	Commands  int64  // script calls sent in them
	Decisions int64  // keys decided by those calls (more than Commands with the batch script)
	// Overload counts the decisions the node had no room for in time
	// while it kept answering (decided by on_overload).
	Overload int64
	// BreakerOpens counts the times the node's breaker opened.
	BreakerOpens int64
	// LateReads counts reads that timed out while the node's reply was
	// already waiting in the socket: sluice, not the node, was late.
	LateReads int64
	// PipelineCost and Service are the door's model of the node's recent
	// service times (overload.go): of a pipeline whatever it carries, and
	// of each decision in it.
	PipelineCost, Service time.Duration
}

// Stats reports every node the store has a queue for: the nodes it has
// sent to that have not left the cluster.
func (s *Store) Stats() []NodeStats {
	states := s.BreakerStates()
	var out []NodeStats
	s.queues.Range(func(_, v any) bool {
		q := v.(*nodeQueue)
		out = append(out, NodeStats{Addr: q.addr, Breaker: states[q.addr], Pipelines: q.pipelines.Load(), Commands: q.commands.Load(), Decisions: q.decisions.Load(),
			Overload: q.overloads.Load(), BreakerOpens: q.br.opens.Load(), LateReads: q.lateReads.Load(), Service: time.Duration(q.service.perDecision.Load()), PipelineCost: time.Duration(q.service.fixed.Load())})
		return true
	})
	slices.SortFunc(out, func(a, b NodeStats) int { return strings.Compare(a.Addr, b.Addr) })
	return out
}
