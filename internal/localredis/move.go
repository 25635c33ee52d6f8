package localredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
)

// migrateBatch is how many keys one MIGRATE carries, as redis-cli
// --cluster reshard's default pipeline.
const migrateBatch = 100

// migrateTimeout is MIGRATE's own timeout, in milliseconds, for the
// target to answer one batch.
const migrateTimeout = 5000

// SlotMove is one live move of a hash slot from its owner to another
// primary, done step by step as `redis-cli --cluster reshard` does it:
// BeginMove (CLUSTER SETSLOT IMPORTING on the target, then MIGRATING on the
// source), MoveKeys (MIGRATE in batches until the source holds none of
// the slot's keys), Finish (CLUSTER SETSLOT NODE on the target, the source
// and every other primary, then a wait until every live node agrees).
// Clients may write to the slot all along: between BeginMove and Finish
// the source answers for the keys it still holds and sends the others to
// the target with -ASK (a key made then is made on the target), and after
// Finish a node that is asked answers -MOVED. A test that checks what
// happens between two steps calls them one by one (Assign sets the owner
// on one node, to make the nodes disagree for a while); MoveSlot is the
// whole.
//
// A step that fails leaves the slot where it is: migrating and importing,
// perhaps with some keys on each side. Calling MoveKeys and Finish again
// (or `redis-cli --cluster fix`) completes the move; nothing undoes it.
// A SlotMove is used from one goroutine.
type SlotMove struct {
	Slot     int
	From, To *Node
	// Moved is the number of keys MoveKeys has migrated so far.
	Moved int

	c        *Cluster
	assigned []*Node
}

// MoveSlot moves slot to the primary to while clients may use it (see
// SlotMove) and returns once every live node names to as its owner.
// Moving a slot to its owner does nothing. Without a deadline on ctx,
// Config.Timeout bounds it.
func (c *Cluster) MoveSlot(ctx context.Context, slot int, to *Node) error {
	ctx, cancel := withDefaultTimeout(ctx, c.s.Timeout)
	defer cancel()
	m, err := c.BeginMove(ctx, slot, to)
	if err != nil {
		if errors.Is(err, errOwnSlot) {
			return nil
		}
		return err
	}
	if _, err := m.MoveKeys(ctx); err != nil {
		return err
	}
	return m.Finish(ctx)
}

var errOwnSlot = errors.New("already owns the slot")

// BeginMove marks slot as importing on to and migrating on its owner. It
// fails, changing nothing, on a slot out of 0…16383, a node that is not a
// live primary of this cluster, or one that already owns the slot (an
// error wrapping a sentinel that MoveSlot treats as done).
func (c *Cluster) BeginMove(ctx context.Context, slot int, to *Node) (*SlotMove, error) {
	if slot < 0 || slot >= SlotCount {
		return nil, fmt.Errorf("localredis: slot %d out of 0…%d", slot, SlotCount-1)
	}
	if !slices.Contains(c.nodes, to) || !to.live() {
		return nil, fmt.Errorf("localredis: move slot %d to %s: not a live node of this cluster", slot, to.Addr)
	}
	v, err := fetchNodes(ctx, to)
	if err != nil {
		return nil, fmt.Errorf("localredis: move slot %d: %w", slot, err)
	}
	if v.self.primaryID != "" {
		return nil, fmt.Errorf("localredis: move slot %d to %s: a replica", slot, to.Addr)
	}
	owner := v.owner(slot)
	if owner == v.self.id {
		return nil, fmt.Errorf("localredis: move slot %d to %s: %w", slot, to.Addr, errOwnSlot)
	}
	from := c.nodeByID(owner)
	if from == nil {
		return nil, fmt.Errorf("localredis: move slot %d: its owner %q is not a node of this cluster", slot, owner)
	}
	m := &SlotMove{Slot: slot, From: from, To: to, c: c}
	if err := m.setslot(ctx, to, "IMPORTING", from.ID); err != nil {
		return nil, err
	}
	if err := m.setslot(ctx, from, "MIGRATING", to.ID); err != nil {
		return nil, errors.Join(err, m.setslot(ctx, to, "STABLE"))
	}
	c.s.log.printf("slot %d migrating %s → %s", slot, from.Addr, to.Addr)
	return m, nil
}

// nodeByID returns the node of this cluster with the cluster node ID id.
func (c *Cluster) nodeByID(id string) *Node {
	for _, n := range c.nodes {
		if id != "" && n.ID == id {
			return n
		}
	}
	return nil
}

func (m *SlotMove) setslot(ctx context.Context, n *Node, args ...any) error {
	full := append([]any{"CLUSTER", "SETSLOT", m.Slot}, args...)
	if err := n.Client().Do(ctx, full...).Err(); err != nil {
		return fmt.Errorf("localredis: %s: %v: %w", n.Addr, full, err)
	}
	return nil
}

// MoveKeys migrates the slot's keys from the source to the target in
// batches (MIGRATE … KEYS, keys with their TTLs) until the source holds
// none, and returns how many it moved in this call. A key a client makes
// meanwhile is made on the target (the source answers -ASK for keys it
// lacks), so the loop ends.
func (m *SlotMove) MoveKeys(ctx context.Context) (int, error) {
	host, port, err := net.SplitHostPort(m.To.Addr)
	if err != nil {
		return 0, fmt.Errorf("localredis: %w", err)
	}
	moved := 0
	for {
		keys, err := m.From.Client().ClusterGetKeysInSlot(ctx, m.Slot, migrateBatch).Result()
		if err != nil {
			return moved, fmt.Errorf("localredis: %s: CLUSTER GETKEYSINSLOT %d: %w", m.From.Addr, m.Slot, err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, migrateTimeout, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		// +NOKEY: every key of the batch expired meanwhile; fine.
		if err := m.From.Client().Do(ctx, args...).Err(); err != nil {
			return moved, fmt.Errorf("localredis: %s: MIGRATE %d key(s) of slot %d to %s: %w", m.From.Addr, len(keys), m.Slot, m.To.Addr, err)
		}
		moved += len(keys)
	}
	m.Moved += moved
	return moved, nil
}

// Assign runs CLUSTER SETSLOT slot NODE <target> on n alone: n then names
// the target as the owner, whatever the others say until they are
// assigned too. On the source it fails while the source holds keys of
// the slot.
func (m *SlotMove) Assign(ctx context.Context, n *Node) error {
	if err := m.setslot(ctx, n, "NODE", m.To.ID); err != nil {
		return err
	}
	m.assigned = append(m.assigned, n)
	return nil
}

// Finish assigns the slot to the target on every primary not yet
// assigned (the target first, then the source, then the others, as
// redis-cli does) and waits until every live node, replicas included
// (they learn it from gossip), names the target as the slot's owner and
// no node still marks it as migrating or importing. Without a deadline on
// ctx, Config.Timeout bounds the wait.
func (m *SlotMove) Finish(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx, m.c.s.Timeout)
	defer cancel()
	began := time.Now()
	order := []*Node{m.To, m.From}
	for _, p := range m.c.Primaries() {
		if p != m.To && p != m.From {
			order = append(order, p)
		}
	}
	for _, n := range order {
		if slices.Contains(m.assigned, n) || !n.live() {
			continue
		}
		if err := m.Assign(ctx, n); err != nil {
			return err
		}
	}
	err := poll(ctx, fmt.Sprintf("slot %d not owned by %s everywhere", m.Slot, m.To.Addr), func() error {
		return m.c.everyLive(ctx, func(n *Node, v *view) error {
			if got := v.owner(m.Slot); got != m.To.ID {
				return fmt.Errorf("%s says slot %d belongs to %q", n.Addr, m.Slot, got)
			}
			if v.moving(m.Slot) {
				return fmt.Errorf("%s still marks slot %d as migrating or importing", n.Addr, m.Slot)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	m.c.s.log.printf("slot %d moved %s → %s (%d key(s)); every live node agreed %v after the first SETSLOT NODE",
		m.Slot, m.From.Addr, m.To.Addr, m.Moved, since(began))
	return nil
}

// fetchNodes asks n for CLUSTER NODES, with no check of the cluster's
// health.
func fetchNodes(ctx context.Context, n *Node) (*view, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	text, err := n.Client().ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.Addr, err)
	}
	v, err := parseClusterNodes(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.Addr, err)
	}
	v.raw = text
	return v, nil
}

// everyLive fetches the CLUSTER NODES of every live node and calls f on
// each; the first error stops it.
func (c *Cluster) everyLive(ctx context.Context, f func(*Node, *view) error) error {
	live := c.liveNodes()
	if len(live) == 0 {
		return errors.New("no live node")
	}
	for _, n := range live {
		v, err := fetchNodes(ctx, n)
		if err != nil {
			return err
		}
		if err := f(n, v); err != nil {
			return err
		}
	}
	return nil
}

// owner returns the ID of the node that v says serves slot, or "".
func (v *view) owner(slot int) string {
	for _, r := range v.ranges {
		if r.start <= slot && slot <= r.end {
			return r.owner
		}
	}
	return ""
}

// moving reports whether the node of v marks slot as migrating or
// importing ("[slot->-id]" or "[slot-<-id]" on its own line).
func (v *view) moving(slot int) bool {
	for _, line := range strings.Split(v.raw, "\n") {
		if !strings.Contains(line, "myself") {
			continue
		}
		return strings.Contains(line, fmt.Sprintf("[%d-", slot))
	}
	return false
}
