package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A node's queue lives as long as the node is a primary of the cluster.
// Nodes leave: a slot move empties one, a replaced machine or rescheduled
// pod comes back on a new address. The sweep stops the queues of nodes the
// slot map no longer names as primaries, once they have sent nothing for
// sweepIdle (an importing node that owns no slot yet still gets ASK
// traffic), with their workers, client and breaker. A request for such a
// node later simply starts a new queue.
const (
	// sweepEvery is the longest time between two sweeps.
	sweepEvery = 10 * time.Second
	// sweepDelay is how long after a sign of change (MOVED, a connectivity
	// failure, a new node) the sweep runs: the cluster settles meanwhile,
	// and a burst of signs makes one sweep.
	sweepDelay = time.Second
	// sweepIdle is how long a queue of a node that is no primary must
	// have been idle to be stopped.
	sweepIdle = sweepDelay / 2
)

// topologyChanged is told of a sign that the cluster's topology may have
// changed: it asks go-redis to reload the slot map (a failover moves slots
// to a replica, a slot move to another primary) and for a sweep.
func (s *Store) topologyChanged() {
	if s.cc == nil {
		return
	}
	s.cc.ReloadState(context.Background())
	s.sweepSoon()
}

// sweepSoon asks for a sweep after sweepDelay; it never blocks.
func (s *Store) sweepSoon() {
	select {
	case s.swept <- struct{}{}:
	default:
	}
}

// sweep runs the sweeps of a cluster Store until Close.
func (s *Store) sweep() {
	defer s.sweeper.Done()
	every := time.NewTicker(sweepEvery)
	defer every.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-every.C:
		case <-s.swept:
			t := time.NewTimer(sweepDelay)
			select {
			case <-s.closing:
				t.Stop()
				return
			case <-t.C:
			}
			select { // the signs that came meanwhile are answered by this sweep
			case <-s.swept:
			default:
			}
		}
		s.sweepOnce()
	}
}

// sweepOnce stops the idle queues of nodes that are no primary by the slot
// map, freshly loaded. When the map cannot be loaded it leaves everything
// as it is.
func (s *Store) sweepOnce() {
	ctx, cancel := context.WithTimeout(context.Background(), max(s.cfg.Timeout, time.Second))
	defer cancel()
	var mu sync.Mutex
	primaries := map[string]bool{}
	err := s.cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		primaries[c.Options().Addr] = true
		mu.Unlock()
		return nil
	})
	if err != nil || len(primaries) == 0 {
		return
	}
	idle := time.Now().Add(-sweepIdle).UnixNano()
	s.queues.Range(func(_, v any) bool {
		if q := v.(*nodeQueue); !primaries[q.addr] && q.last.Load() < idle {
			s.stopQueue(q)
		}
		return true
	})
}

// stopQueue takes q out of use: new requests for its node start a new
// queue, its workers send what is queued already and exit, then its client
// is closed.
func (s *Store) stopQueue(q *nodeQueue) {
	s.mu.Lock()
	if !s.queues.CompareAndDelete(q.addr, q) {
		s.mu.Unlock()
		return
	}
	if s.breakers[q.addr] == q.br {
		delete(s.breakers, q.addr)
	}
	s.mu.Unlock()
	q.mu.Lock()
	q.stopped = true
	q.mu.Unlock()
	close(q.stop)
	q.workers.Wait()
	q.closeLinks()
	_ = q.client.Close()
}
