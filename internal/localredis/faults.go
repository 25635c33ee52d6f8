package localredis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// HoldReplication holds back primary's replication stream until release
// is called, so that a primary killed meanwhile loses for good the writes
// it answered since: its replicas never get them.
//
// Pausing a replica alone does not do it: the kernel keeps receiving the
// stream into the paused process's socket, and a resumed replica reads
// it, even after the primary died. Nor does a replica's link down in a
// Netns cluster: inside the namespace the nodes reach each other however
// their links to the root namespace are set. So HoldReplication pauses
// every replica of primary (SIGSTOP, as of the last healthy check) and
// then closes the primary's replica connections (CLIENT KILL TYPE
// replica): from then on the primary writes only to its backlog, and a
// stopped replica cannot reconnect. What was sent before the kill may
// still reach a replica.
//
// release resumes the replicas (SIGCONT); it is idempotent. A resumed
// replica of a primary still running reconnects and catches up from the
// backlog (partial resync); one whose primary was killed has only what it
// had, and Takeover promotes it. The replicas are paused for the whole
// hold: one held longer than the cluster's NodeTimeout is seen as failing
// by the other nodes until it is back.
func (c *Cluster) HoldReplication(ctx context.Context, primary *Node) (release func() error, err error) {
	if !slices.Contains(c.Primaries(), primary) {
		return nil, fmt.Errorf("localredis: hold replication of %s: not a primary as of the last healthy check", primary.Addr)
	}
	replicas := c.ReplicasOf(primary)
	if len(replicas) == 0 {
		return nil, fmt.Errorf("localredis: hold replication of %s: it has no replica", primary.Addr)
	}
	var paused []*Node
	var once sync.Once
	var releaseErr error
	release = func() error {
		once.Do(func() {
			var errs []error
			for _, r := range paused {
				if r.Paused() {
					errs = append(errs, r.Resume())
				}
			}
			releaseErr = errors.Join(errs...)
			c.s.log.printf("released the replication of %s", primary.Addr)
		})
		return releaseErr
	}
	for _, r := range replicas {
		if err := r.Pause(); err != nil {
			return nil, errors.Join(err, release())
		}
		paused = append(paused, r)
	}
	if err := primary.Client().Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		return nil, errors.Join(fmt.Errorf("localredis: %s: CLIENT KILL TYPE replica: %w", primary.Addr, err), release())
	}
	info, err := primary.Client().Info(ctx, "replication").Result()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("localredis: %s: INFO replication: %w", primary.Addr, err), release())
	}
	if got := parseInfo(info)["connected_slaves"]; got != "0" {
		return nil, errors.Join(fmt.Errorf("localredis: %s: connected_slaves:%s after CLIENT KILL TYPE replica", primary.Addr, got), release())
	}
	c.s.log.printf("holding back the replication of %s: %d replica(s) paused, their links closed", primary.Addr, len(paused))
	return release, nil
}

// Takeover promotes replica with CLUSTER FAILOVER TAKEOVER (no vote of
// the other primaries, no agreement of its primary: it works with the
// primary dead, paused or cut off) and waits until every live node says
// replica is a primary owning every slot its primary owned. A replica
// already promoted is only waited for. The topology that Primaries and
// ReplicasOf return is then what the live nodes said. Without a deadline
// on ctx, Config.Timeout bounds the wait.
func (c *Cluster) Takeover(ctx context.Context, replica *Node) error {
	ctx, cancel := withDefaultTimeout(ctx, c.s.Timeout)
	defer cancel()
	began := time.Now()
	v, err := fetchNodes(ctx, replica)
	if err != nil {
		return fmt.Errorf("localredis: takeover: %w", err)
	}
	old := v.self.primaryID
	var slots []slotRange
	if old == "" {
		// Promoted already (by a failover, or a Takeover before): wait for
		// the others to agree on what it owns.
		slots = v.self.slots
		if len(slots) == 0 {
			return fmt.Errorf("localredis: takeover by %s: a primary with no slots", replica.Addr)
		}
	} else {
		for _, r := range v.ranges {
			if r.owner == old {
				slots = append(slots, r)
			}
		}
		if err := replica.Client().Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER").Err(); err != nil {
			// A failover may have promoted it meanwhile.
			if now, ferr := fetchNodes(ctx, replica); ferr != nil || now.self.primaryID != "" {
				return fmt.Errorf("localredis: %s: CLUSTER FAILOVER TAKEOVER: %w", replica.Addr, err)
			}
		}
	}
	var t *topology
	err = poll(ctx, "takeover by "+replica.Addr+" not agreed", func() error {
		t = &topology{byPort: make(map[int]entry)}
		return c.everyLive(ctx, func(n *Node, v *view) error {
			t.byPort[n.Port] = v.self
			es := v.byPort[replica.Port]
			if len(es) != 1 || es[0].primaryID != "" {
				return fmt.Errorf("%s does not see %s as a primary yet", n.Addr, replica.Addr)
			}
			for _, r := range slots {
				for s := r.start; s <= r.end; s++ {
					if got := v.owner(s); got != replica.ID {
						return fmt.Errorf("%s says slot %d belongs to %q, not to %s", n.Addr, s, got, replica.Addr)
					}
				}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	c.setTopology(t)
	c.s.log.printf("%s took over the slots of %s; every live node agreed %v after the call", replica.Addr, old, since(began))
	return nil
}

// RestartEmpty restarts primary with no data and no replica to take its
// place, as a primary whose replicas are down would come back after a
// crash: it kills primary's replicas (as of the last healthy check),
// restarts primary (Node.Restart: its data removed, its cluster identity
// and slots kept), waits until the cluster is healthy without them, then
// restarts the replicas, which resync from the empty primary, and waits
// until the cluster is healthy again with primary still the owner of its
// slots. A primary with no replica is only restarted and waited for.
// It takes 2 s at least: a restarted primary says cluster_state:fail for
// its first 2 s (Redis's CLUSTER_WRITABLE_DELAY, a chance for the cluster
// to demote it first), and its slots are unserved until then. Without a
// deadline on ctx, Config.Timeout bounds it.
func (c *Cluster) RestartEmpty(ctx context.Context, primary *Node) error {
	ctx, cancel := withDefaultTimeout(ctx, c.s.Timeout)
	defer cancel()
	if !slices.Contains(c.Primaries(), primary) {
		return fmt.Errorf("localredis: restart %s empty: not a primary as of the last healthy check", primary.Addr)
	}
	began := time.Now()
	replicas := c.ReplicasOf(primary)
	for _, r := range replicas {
		if err := r.Kill(); err != nil {
			return err
		}
	}
	if err := primary.Restart(ctx); err != nil {
		return err
	}
	if _, err := c.waitHealthy(ctx); err != nil {
		return err
	}
	for _, r := range replicas {
		if err := r.Restart(ctx); err != nil {
			return err
		}
	}
	t, err := c.waitHealthy(ctx)
	if err != nil {
		return err
	}
	if e := t.byPort[primary.Port]; e.primaryID != "" || len(e.slots) == 0 {
		return fmt.Errorf("localredis: restart %s empty: it came back as a replica of %q, or with no slots", primary.Addr, e.primaryID)
	}
	c.s.log.printf("%s restarted empty, its %d replica(s) resynced; healthy %v after the call", primary.Addr, len(replicas), since(began))
	return nil
}
