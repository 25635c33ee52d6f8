package limiter

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// An orphan is a slot the store may hold that no caller knows of: the
// token of an acquire that timed out (it may have run in Redis after its
// caller was answered), or of one the store admitted past what the
// fallback's slots leave (see acquire). sluice made its token, so it
// releases it in the background: never on the caller's time, with bounded
// retries, until the store answers or the slot's TTL has passed.
type orphan struct {
	key   string
	p     *limit.Policy
	token string
	until time.Time // the slot's expiry at the latest: after it, nothing is left to free
	next  time.Time // the next attempt
	tries int
	zeros int // answers of "not held": believed on the second (the acquire may run after the first)
}

// The bounds of the orphans' releases: at most maxOrphans waiting (past
// it a slot frees itself by its TTL), at most orphanTries attempts each,
// orphanBackoff doubling up to orphanMaxBackoff between attempts (about
// 20 s in all), orphanWorkers at a time.
const (
	orphanWorkers    = 16
	maxOrphans       = 100_000
	orphanTries      = 14
	orphanBackoff    = 25 * time.Millisecond
	orphanMaxBackoff = 2 * time.Second
)

// orphans is the Limiter's queue of orphans and their counters. A
// goroutine runs while it holds any; it is safe for concurrent use.
type orphans struct {
	mu      sync.Mutex
	list    []orphan
	running bool
	wake    chan struct{}

	queued, freed, dropped atomic.Int64
}

// orphan queues the release of token's slot under key, held at most
// ttlMs from now; it never blocks.
func (l *Limiter) orphan(key string, p *limit.Policy, token string, ttlMs int64) {
	o := &l.orphans
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.list) >= maxOrphans {
		o.dropped.Add(1)
		return
	}
	o.queued.Add(1)
	o.list = append(o.list, orphan{key: key, p: p, token: token, until: now.Add(time.Duration(ttlMs) * time.Millisecond), next: now})
	if o.wake == nil {
		o.wake = make(chan struct{}, 1)
	}
	select {
	case o.wake <- struct{}{}:
	default:
	}
	if !o.running {
		o.running = true
		go l.releaseOrphans()
	}
}

// releaseOrphans releases the orphans as their attempts come due, and
// returns when none is left.
func (l *Limiter) releaseOrphans() {
	o := &l.orphans
	for {
		now := time.Now()
		o.mu.Lock()
		var due []orphan
		keep := o.list[:0]
		var next time.Time
		for _, x := range o.list {
			if x.next.After(now) {
				keep = append(keep, x)
				if next.IsZero() || x.next.Before(next) {
					next = x.next
				}
			} else {
				due = append(due, x)
			}
		}
		clear(o.list[len(keep):])
		o.list = keep
		if len(due) == 0 && len(keep) == 0 {
			o.running = false
			o.mu.Unlock()
			return
		}
		o.mu.Unlock()
		var wg sync.WaitGroup
		sem := make(chan struct{}, orphanWorkers)
		for i := range due {
			sem <- struct{}{}
			wg.Add(1)
			go func(x *orphan) {
				defer func() { <-sem; wg.Done() }()
				if l.releaseOrphan(x, now) {
					o.mu.Lock()
					o.list = append(o.list, *x)
					o.mu.Unlock()
				}
			}(&due[i])
		}
		wg.Wait()
		o.mu.Lock()
		for _, x := range o.list {
			if next.IsZero() || x.next.Before(next) {
				next = x.next
			}
		}
		o.mu.Unlock()
		if !next.IsZero() {
			t := time.NewTimer(time.Until(next))
			select {
			case <-t.C:
			case <-o.wake:
			}
			t.Stop()
		}
	}
}

// releaseOrphan makes one attempt at x and reports whether another is due
// (x.next says when).
func (l *Limiter) releaseOrphan(x *orphan, now time.Time) bool {
	o := &l.orphans
	if !now.Before(x.until) {
		o.freed.Add(1) // its TTL has freed it
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout())
	held, err := l.slotStore.Release(ctx, x.key, x.p, x.token)
	cancel()
	x.tries++
	switch {
	case err == nil && held:
		o.freed.Add(1)
		return false
	case err == nil:
		x.zeros++
		if x.zeros >= 2 {
			o.freed.Add(1) // it never ran, or is gone
			return false
		}
	case !errors.Is(err, limit.ErrUnavailable):
		o.dropped.Add(1) // an error to surface is not retried
		return false
	}
	if x.tries >= orphanTries {
		o.dropped.Add(1)
		return false
	}
	wait := min(orphanMaxBackoff, orphanBackoff<<min(x.tries, 10))
	x.next = now.Add(wait)
	return true
}

// pending is the number of orphans waiting, for tests.
func (o *orphans) pending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.list)
}

// idle reports whether no orphan waits and none is being released, for
// tests.
func (o *orphans) idle() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.running && len(o.list) == 0
}
