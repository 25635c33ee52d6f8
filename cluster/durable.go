package cluster

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/limit"
)

// Durability (docs/durability.md). A pipeline in which the node admitted
// a spend of a policy with durability: replica is followed by one WAIT 1
// <ms> on the same connection: Redis answers it once a replica has
// acknowledged every write the connection made, or after ms with 0. When
// no replica acknowledged, every durable spend of that pipeline the
// scripts admitted is answered unavailable (ErrNotReplicated), so the
// limiter answers it by its policy's on_store_error, and it is never sent
// again: it is on the primary already, which can only under-admit. A
// refusal, a peek and a give-back are answered as the node answered them:
// they write nothing a failover could lose that would let more in.

// ErrNotReplicated is the cause (inside a limit.UnavailableError) of a
// durable spend that no replica acknowledged within its deadline.
var ErrNotReplicated = errors.New("no replica acknowledged the spend in time (WAIT)")

// durableOf is the item field durable for a request: its policy's name
// when the request spends under a policy with durability: replica, else "".
func durableOf(r *limit.Request) string {
	if r.Policy == nil || !r.Policy.Durable() {
		return ""
	}
	switch {
	case r.Op == limit.OpTake && r.Cost > 0, r.Op == limit.OpClaim && r.Cost > 0, r.Op == limit.OpAdjust && r.Cost > 0:
		return r.Policy.Name
	}
	return ""
}

// replicate runs the WAIT of a pipeline whose replies are filed in
// items, on l, the pipeline's connection: WAIT counts the replicas that
// acknowledged every write of the connection it is sent on. It is sent
// only when the node admitted a durable spend: a refusal, a peek, a
// script that met NOSCRIPT or a redirection wrote nothing to wait for.
// When no replica acknowledged in time, or the connection broke in the
// pipeline (another connection's WAIT would wait for nothing), every
// such spend is answered unavailable instead, and counted. It reports
// whether a WAIT was not acknowledged (the round trip then says nothing
// of the node's speed).
//
// WAIT's timeout is four fifths of what is left of the earliest deadline
// of those spends, whole ms and at least 1 (WAIT 1 0 would block for
// ever). Redis ends a blocked command's timeout only in its cron, every
// 1000/hz ms (100 ms at the default hz 10), so it may answer well after
// it: sluice does not wait past nine tenths of what is left, and a WAIT
// cut short is not acknowledged. The last tenth is for the answers to be
// filed before the requests' waiters give up on them.
//
// A WAIT not acknowledged says the node has no replica that keeps up; the
// next ones would each hold a pipeline slot of the node as long, and its
// other traffic would queue behind them. So after one the node is in a
// spell: no WAIT is sent, and its durable spends are answered by
// on_store_error at once. The first pipeline that finds the spell over
// probes with a WAIT in full; while probes fail, each spell is twice the
// last, from minSpell up to a breaker cool-down, so that a replica that
// missed one acknowledgement (a resync, a pause) costs a few ms of
// on_store_error, and one that is gone costs one stalled pipeline per
// cool-down. An acknowledged WAIT ends the spells.
func (q *nodeQueue) replicate(ctx context.Context, l *link, items []*item) (stalled bool) {
	var by time.Time
	n := 0
	for _, it := range items {
		if it.durable != "" && !it.again && !it.eval && !it.retry && spent(it) {
			n++
			if by.IsZero() || it.by.Before(by) {
				by = it.by
			}
		}
	}
	if n == 0 {
		return false
	}
	now := time.Now()
	var cause error
	switch until := q.unackedUntil.Load(); {
	case !l.open():
		cause = errBroken
	case until != 0 && (now.UnixNano() < until || !q.unackedUntil.CompareAndSwap(until, now.Add(q.nextSpell(false)).UnixNano())):
		// In a spell, or another pipeline took the probe (and set the
		// next spell, in case it fails).
		cause = errSpell
	default:
		left := by.Sub(now)
		wctx, cancel := context.WithDeadline(ctx, now.Add(left-left/10))
		acked, err := l.wait(wctx, 1, waitMs(left))
		cancel()
		if err == nil && acked >= 1 {
			if q.unackedUntil.Load() != 0 {
				q.unackedUntil.Store(0)
				q.spell.Store(0)
			}
			return false
		}
		q.unackedUntil.Store(time.Now().Add(q.nextSpell(true)).UnixNano())
		stalled, cause = true, err
	}
	e := &limit.UnavailableError{Node: q.addr, Err: ErrNotReplicated}
	if cause != nil {
		e.Err = errors.Join(ErrNotReplicated, cause)
	}
	for _, it := range items {
		if it.durable == "" || it.again || it.eval || it.retry || !spent(it) {
			continue
		}
		it.res = limit.Result{Err: e}
		if it.multi != nil {
			clear(it.multi)
		}
		q.s.unacked.add(it.durable)
		q.s.observeErr(q.addr, ErrNotReplicated)
	}
	return stalled
}

// minSpell is the first spell after a WAIT not acknowledged (replicate).
const minSpell = 10 * time.Millisecond

// nextSpell is the length of the spell that starts now: minSpell after
// an acknowledged WAIT, then twice the last, at most a breaker cool-down.
// grow is false when the spell is only set in case a probe fails (the
// probe's own failure grows it).
func (q *nodeQueue) nextSpell(grow bool) time.Duration {
	last := time.Duration(q.spell.Load())
	next := min(q.s.cfg.BreakerCooldown, max(minSpell, 2*last))
	if !grow {
		return max(last, minSpell)
	}
	q.spell.Store(int64(next))
	return next
}

// waitMs is WAIT's timeout for left, what is left of the deadline.
func waitMs(left time.Duration) int64 {
	return max(1, (left - left/5).Milliseconds())
}

// errSpell and errBroken are causes of a durable spend not waited for:
// its node is in a spell (replicate), or the pipeline's connection broke.
var (
	errSpell  = errors.New("no replica acknowledged the node's last WAIT; waiting again after the breaker cool-down")
	errBroken = errors.New("the connection broke before WAIT")
)

// spent reports whether the node's answer to it spent something.
func spent(it *item) bool {
	if it.res.Err != nil {
		return false
	}
	// An RL.ADJUST that spends travels as a return of a negative cost
	// (adjustArgs), and spends whatever the bucket holds.
	return it.res.Allowed || it.res.Granted > 0 || it.op == limit.OpReturn && it.cost < 0
}

// unackedCounts counts, by policy, the durable spends no replica
// acknowledged in time.
type unackedCounts struct {
	m sync.Map // policy name → *atomic.Int64
}

func (u *unackedCounts) add(name string) {
	v, ok := u.m.Load(name)
	if !ok {
		v, _ = u.m.LoadOrStore(name, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

// Unacked reports, by policy name, the spends of durability: replica
// policies that no replica acknowledged in time, answered by their
// on_store_error instead (sluice_durability_unacked_total).
func (s *Store) Unacked() map[string]int64 {
	out := map[string]int64{}
	s.unacked.m.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// PrimariesWithoutReplica returns the primaries that have no replica
// online now (INFO replication, slaveN's state), for the warning at
// start of a config with durability: replica: until one attaches, every
// durable spend on them is answered by on_store_error.
func (s *Store) PrimariesWithoutReplica(ctx context.Context) ([]string, error) {
	var mu sync.Mutex
	var out []string
	check := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		// A replica counts once it is online: one still loading the
		// primary's data (wait_bgsave, send_bulk) acknowledges nothing.
		if !strings.Contains(info, ",state=online,") {
			mu.Lock()
			out = append(out, c.Options().Addr)
			mu.Unlock()
		}
		return nil
	}
	var err error
	if s.cc != nil {
		err = s.cc.ForEachMaster(ctx, check)
	} else {
		err = check(ctx, s.single)
	}
	slices.Sort(out)
	return out, err
}
