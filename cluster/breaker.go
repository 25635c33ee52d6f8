package cluster

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrCircuitOpen is the error of a request that was not sent because its
// node's circuit breaker is open.
var ErrCircuitOpen = errors.New("circuit breaker open")

// Breaker states.
const (
	closed int32 = iota
	open
	halfOpen
)

// breaker stops waiting on a node that keeps failing: after Threshold
// consecutive connectivity failures it opens, and requests to the node fail
// at once for Cooldown; then one probe batch is let through, which closes it
// on success and opens it again on failure. Safe for concurrent use; the
// closed state, the common one, is one atomic load.
type breaker struct {
	state     atomic.Int32
	threshold int
	cooldown  time.Duration

	fails atomic.Int32 // consecutive failures

	mu       sync.Mutex
	openedAt time.Time
	probing  bool
	opens    atomic.Int64
}

func newBreaker(threshold int, cooldown time.Duration) *breaker {
	return &breaker{threshold: threshold, cooldown: cooldown}
}

// allow reports whether a batch may go to the node now.
func (b *breaker) allow(now time.Time) bool {
	if b.state.Load() == closed {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state.Load() {
	case closed:
		return true
	case open:
		if now.Sub(b.openedAt) < b.cooldown {
			return false
		}
		b.state.Store(halfOpen)
		b.probing = true
		return true
	default: // half-open: one probe at a time
		if b.probing {
			return false
		}
		b.probing = true
		return true
	}
}

// report records the outcome of a batch: ok means the node answered.
func (b *breaker) report(ok bool, now time.Time) {
	if ok && b.state.Load() == closed {
		if b.fails.Load() != 0 {
			b.fails.Store(0)
		}
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	if ok {
		b.fails.Store(0)
		b.state.Store(closed)
		return
	}
	n := b.fails.Add(1)
	if b.state.Load() == halfOpen || int(n) >= b.threshold {
		if b.state.Load() != open {
			b.opens.Add(1)
		}
		b.state.Store(open)
		b.openedAt = now
	}
}

func (b *breaker) stateName() string {
	switch b.state.Load() {
	case open:
		return "open"
	case halfOpen:
		return "half-open"
	}
	return "closed"
}
