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
// consecutive connectivity failures it asks the node directly (confirm:
// a PING on its own, waiting up to the cool-down), and opens only when
// that goes unanswered too; requests to the node then fail at once for
// Cooldown; then one probe batch is let through, which closes it on
// success and opens it again on failure. Safe for concurrent use; the
// closed state, the common one, is one atomic load.
//
// The confirmation is what tells a dead node from a slow sluice: under a
// surge sluice's goroutines wait for a CPU, and a reply that sits in the
// socket past its pipeline's deadline looks like silence. A node that
// answers the PING is alive; its requests are overloaded, not failed.
type breaker struct {
	state     atomic.Int32
	threshold int
	cooldown  time.Duration

	fails atomic.Int32 // consecutive failures

	mu         sync.Mutex
	openedAt   time.Time
	probing    bool
	confirming bool
	opens      atomic.Int64
	alive      atomic.Int64 // confirmations the node answered
	// confirm, when set, asks the node whether it is alive; it is called
	// on its own goroutine and must return within the cool-down.
	confirm func() bool
}

func newBreaker(threshold int, cooldown time.Duration) *breaker {
	return &breaker{threshold: threshold, cooldown: cooldown}
}

// setConfirm sets the question the breaker asks the node before opening.
func (b *breaker) setConfirm(f func() bool) {
	b.mu.Lock()
	b.confirm = f
	b.mu.Unlock()
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
	switch {
	case b.state.Load() == halfOpen:
		b.openLocked(now)
	case int(n) < b.threshold || b.state.Load() == open:
	case b.confirm == nil:
		b.openLocked(now)
	case !b.confirming:
		b.confirming = true
		go b.confirmAlive()
	}
}

// confirmAlive asks the node whether it is alive and opens the breaker
// when it does not answer.
func (b *breaker) confirmAlive() {
	ok := b.confirm()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.confirming = false
	if ok {
		b.alive.Add(1)
		if b.state.Load() == closed {
			b.fails.Store(0)
		}
		return
	}
	if b.state.Load() == closed {
		b.openLocked(time.Now())
	}
}

func (b *breaker) openLocked(now time.Time) {
	if b.state.Load() != open {
		b.opens.Add(1)
	}
	b.state.Store(open)
	b.openedAt = now
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
