package cluster

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/limit"
)

// unit is the items of one Do call that go to one node.
type unit struct {
	node  *redis.Client
	ctx   context.Context
	items []*item
	done  chan struct{} // closed by the worker when every item is filed
}

// nodeQueue feeds one node's workers. Each worker takes whatever is queued
// when it is free, up to MaxBatch commands, and sends it as one pipeline:
// batching without timers, so an idle node answers a lone request at once
// and a busy one gets fewer, larger pipelines.
type nodeQueue struct {
	s    *Store
	node *redis.Client
	addr string
	br   *breaker
	ch   chan *unit

	pipelines, commands atomic.Int64
}

func (s *Store) queue(node *redis.Client) *nodeQueue {
	if q, ok := s.queues.Load(node); ok {
		return q.(*nodeQueue)
	}
	addr := node.Options().Addr
	q := &nodeQueue{s: s, node: node, addr: addr, br: s.breaker(addr), ch: make(chan *unit, 4096)}
	if actual, loaded := s.queues.LoadOrStore(node, q); loaded {
		return actual.(*nodeQueue)
	}
	for range s.cfg.Pipelines {
		go q.work()
	}
	return q
}

// submit queues u; when the queue is full it waits, at most until u's
// deadline (the caller then answers unavailable).
func (q *nodeQueue) submit(u *unit) {
	select {
	case q.ch <- u:
	case <-u.ctx.Done():
	}
}

func (q *nodeQueue) work() {
	batch := make([]*unit, 0, 64)
	for {
		var u *unit
		select {
		case u = <-q.ch:
		case <-q.s.closing:
			return
		}
		batch = append(batch[:0], u)
		n := len(u.items)
	drain:
		for n < q.s.cfg.MaxBatch {
			select {
			case u = <-q.ch:
				batch = append(batch, u)
				n += len(u.items)
			default:
				break drain
			}
		}
		q.send(batch)
		for _, u := range batch {
			close(u.done)
		}
	}
}

// send runs one pipeline for the batch, then one more with EVAL for any
// command that met NOSCRIPT (a restarted or failed-over node). It stops at
// the earliest deadline in the batch; units already past theirs are not
// sent at all.
func (q *nodeQueue) send(batch []*unit) {
	var deadline time.Time
	var items []*item
	for _, u := range batch {
		d, ok := u.ctx.Deadline()
		if err := u.ctx.Err(); err != nil {
			q.fail(u.items, err)
			continue
		}
		if ok && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
		items = append(items, u.items...)
	}
	if len(items) == 0 {
		return
	}
	if !q.br.allow(time.Now()) {
		q.fail(items, ErrCircuitOpen)
		return
	}
	ctx := context.Background()
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	reached := q.pipeline(ctx, items)
	var again []*item
	for _, it := range items {
		switch {
		case !it.eval:
		case reached:
			again = append(again, it)
		default:
			it.eval = false
			it.res = limit.Result{Err: &limit.UnavailableError{Node: q.addr, Err: errNoReply}}
		}
	}
	if len(again) > 0 {
		reached = q.pipeline(ctx, again)
	}
	q.br.report(reached, time.Now())
}

// pipeline sends items in one round trip and files each reply; it reports
// whether the node answered.
func (q *nodeQueue) pipeline(ctx context.Context, items []*item) bool {
	q.pipelines.Add(1)
	q.commands.Add(int64(len(items)))
	cmds := make([]*redis.IntSliceCmd, len(items))
	start := time.Now()
	_, _ = q.node.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, it := range items {
			if it.ask {
				_ = p.Process(ctx, redis.NewCmd(ctx, "asking"))
			}
			if it.eval {
				args := append([]any{"eval", it.script.Src}, it.args[2:]...)
				cmds[i] = redis.NewIntSliceCmd(ctx, args...)
			} else {
				cmds[i] = redis.NewIntSliceCmd(ctx, it.args...)
			}
			_ = p.Process(ctx, cmds[i])
		}
		return nil
	})
	if o := q.s.cfg.Observer; o != nil {
		o.Pipeline(q.addr, time.Since(start), len(items))
	}
	reached := true
	for i, it := range items {
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
	return reached
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
}

// Stats reports every node the store has sent to.
func (s *Store) Stats() []NodeStats {
	states := s.BreakerStates()
	var out []NodeStats
	s.queues.Range(func(_, v any) bool {
		q := v.(*nodeQueue)
		out = append(out, NodeStats{Addr: q.addr, Breaker: states[q.addr], Pipelines: q.pipelines.Load(), Commands: q.commands.Load()})
		return true
	})
	slices.SortFunc(out, func(a, b NodeStats) int { return strings.Compare(a.Addr, b.Addr) })
	return out
}
