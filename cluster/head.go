package cluster

import (
	"sync"
	"sync/atomic"
	"time"
)

// The head of a node's queue. A caller that finds its node busy — every
// pipeline slot in flight — and nothing queued opens a seat: it waits for
// a slot itself, and the units that come for the node meanwhile board the
// seat instead of the queue, up to the pipeline's size limit. When a slot
// frees, the head sends itself and its passengers as one pipeline, on its
// own goroutine, as a worker would. At pipeline 1, where a node's slots
// are nearly always busy, nearly every unit used to go to a worker: the
// head's own unit is then answered without a hand-off, the workers park
// less, and the pipelines are larger (docs/performance.md, "The head of
// the queue sends the pipeline", has the figures).
//
// The deadline rule. A pipeline waits for the latest deadline of what it
// carries (Timeout at least, sendNow), so that a request near its end
// never cuts the time of the fresh ones beside it; and a request must
// never wait past its own deadline for a pipeline it is not in. So:
//   - The head waits for a slot until its deadline, like any queued unit;
//     then it is answered as expired in the queue (late), and its
//     passengers go to the queue for the workers.
//   - The head sends its pipeline itself only when that pipeline's deadline
//     is at most headGrace past its own: else it hands the pipeline, with
//     the slot it holds, to a goroutine of its own and waits for its unit
//     like any other request, answered at its own deadline if the node is
//     slow. (A lone caller of an idle node keeps to the same rule.)
//   - The head holds one slot, for one pipeline, as a worker does: a
//     stalled node holds it no longer than it would hold a worker, and the
//     breaker, the overload model and the late-read look hear of the
//     pipeline as of any other.
type seat struct {
	units []*unit // the head, then the passengers in arrival order
	n     int     // their items
}

// seatPool keeps seats and their slices from one head to the next.
var seatPool = sync.Pool{New: func() any { return &seat{units: make([]*unit, 0, 16)} }}

// headGrace is how far past its own deadline a caller that sends its
// pipeline itself may be held, as a share of Timeout: the pipeline waits
// for the latest deadline of what it carries, and a head sends only
// while that is at most Timeout/headGrace later than its own.
const headGrace = 8

// seats is a node queue's open seat: at most one at a time. The pointer
// is read without the lock (seatOpen); it is set, and a seat's units
// changed, under it.
type seats struct {
	mu   sync.Mutex
	open atomic.Pointer[seat] // nil: no caller waits at the head of the queue
}

// board puts u on q's open seat if there is one with room: u is then the
// head's to send (or to hand to the queue). It reports whether u boarded.
func (q *nodeQueue) board(u *unit) bool {
	if q.seats.open.Load() == nil {
		return false
	}
	q.seats.mu.Lock()
	defer q.seats.mu.Unlock()
	st := q.seats.open.Load()
	if st == nil || st.n+len(u.items) > int(q.batchLimit.Load()) {
		return false
	}
	st.units = append(st.units, u)
	st.n += len(u.items)
	q.waiting.Add(1)
	q.passengers.Add(1)
	return true
}

// seatOpen reports whether a caller waits at the head of q's queue.
func (q *nodeQueue) seatOpen() bool { return q.seats.open.Load() != nil }

// lead opens a seat for u, whose caller then waits for a slot and sends;
// false when a seat is open already.
func (q *nodeQueue) lead(u *unit) (*seat, bool) {
	if q.seats.open.Load() != nil {
		return nil, false
	}
	q.seats.mu.Lock()
	defer q.seats.mu.Unlock()
	if q.seats.open.Load() != nil {
		return nil, false
	}
	st := seatPool.Get().(*seat)
	st.units, st.n = append(st.units[:0], u), len(u.items)
	q.seats.open.Store(st)
	q.waiting.Add(1)
	return st, true
}

// closeSeat closes the seat: no unit boards it after this, and its head
// alone reads it. It returns its units, the head first, and their items.
func (q *nodeQueue) closeSeat(st *seat) ([]*unit, int) {
	q.seats.mu.Lock()
	defer q.seats.mu.Unlock()
	q.seats.open.CompareAndSwap(st, nil)
	q.waiting.Add(-int64(len(st.units)))
	return st.units, st.n
}

// putSeat returns st to the pool once nothing reads its units.
func putSeat(st *seat, units []*unit) {
	if cap(units) > 256 {
		return
	}
	clear(units)
	st.units, st.n = units[:0], 0
	seatPool.Put(st)
}

// head is the caller of u at the head of q's queue, under q.mu's read
// lock: it waits for a slot, then sends u and its passengers (and what
// else is queued, up to the pipeline's size limit) by the deadline rule
// above. It returns ErrClosed when the Store closes meanwhile; else u is
// done or handed to a sender, and its caller waits for it.
func (q *nodeQueue) head(u *unit, st *seat) error {
	var l *link
	if len(q.slots) == 0 {
		q.parks.Add(1)
	}
	select {
	case l = <-q.slots:
	case <-u.ctx.Done():
	case <-q.s.closing:
	}
	batch, n := q.closeSeat(st)
	if l == nil {
		// No slot in time: the passengers go to the workers' queue, and the
		// head is answered as a unit that expired there.
		for _, p := range batch[1:] {
			select {
			case q.ch <- p:
			case <-p.ctx.Done(): // its waiter answers it: late
				q.backlog.Add(-int64(len(p.items)))
			case <-q.s.closing:
			}
		}
		putSeat(st, batch)
		q.backlog.Add(-int64(len(u.items)))
		if err := u.ctx.Err(); err != nil {
			q.expired(u, err)
			close(u.done)
			return nil
		}
		return ErrClosed
	}
drain:
	for most := int(q.batchLimit.Load()); n < most; {
		select {
		case p := <-q.ch:
			batch = append(batch, p)
			n += len(p.items)
		default:
			break drain
		}
	}
	q.headSent.Add(1)
	q.sendOwn(u, batch, l, st)
	return nil
}

// sendOwn sends batch, headed by u, on l, the link of the slot the caller
// holds, from the caller's goroutine when the deadline rule lets it hold
// the caller until the pipeline's deadline; else from a goroutine of its
// own (counted with the workers, whom a sweep waits for), and the caller
// waits for u as for a queued unit. st, if not nil, is the seat batch
// came from, pooled again once batch is sent.
func (q *nodeQueue) sendOwn(u *unit, batch []*unit, l *link, st *seat) {
	now := time.Now()
	if !q.mayHold(u, batch, now) {
		q.handedOff.Add(1)
		q.workers.Add(1)
		go func() {
			defer q.workers.Done()
			q.sendHeld(batch, l, now, st)
		}()
		return
	}
	q.sendHeld(batch, l, now, st)
}

// sendHeld sends batch on l, puts l's slot back and answers the batch.
func (q *nodeQueue) sendHeld(batch []*unit, l *link, now time.Time, st *seat) {
	q.last.Store(now.UnixNano())
	k := q.send(batch, l)
	q.slots <- l
	for _, p := range batch[k:] {
		q.finish(p)
	}
	if st != nil {
		putSeat(st, batch)
	}
}

// mayHold reports whether the caller of u may send batch itself at now:
// whether the pipeline's deadline, the latest of the batch's and Timeout
// from now at least (sendNow), is at most Timeout/headGrace past u's own.
// A caller without a deadline may always wait for its pipeline.
func (q *nodeQueue) mayHold(u *unit, batch []*unit, now time.Time) bool {
	own, ok := u.ctx.Deadline()
	if !ok {
		return true
	}
	latest := now.Add(min(q.s.cfg.Timeout, q.s.cfg.MaxTimeout))
	for _, p := range batch {
		if d, ok := p.ctx.Deadline(); ok && d.After(latest) {
			latest = d
		} else if !ok {
			if d := now.Add(q.s.cfg.Timeout); d.After(latest) {
				latest = d
			}
		}
	}
	return !latest.After(own.Add(q.s.cfg.Timeout / headGrace))
}
