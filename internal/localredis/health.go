package localredis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// pollEvery is the pause between two looks at the cluster while waiting.
const pollEvery = 50 * time.Millisecond

// entry is one line of CLUSTER NODES.
type entry struct {
	id        string
	port      int
	flags     []string
	primaryID string // "" for a primary
	slots     []slotRange
}

type slotRange struct {
	start, end int
	owner      string // node ID
}

// view is what one node answers to CLUSTER NODES.
type view struct {
	self    entry
	byPort  map[int][]entry
	ranges  []slotRange // sorted by start
	slotMap string      // ranges as text, to compare views
	raw     string      // the reply, when kept (fetchNodes)
}

// topology is the cluster as every live node agreed on it in one healthy
// check.
type topology struct {
	byPort map[int]entry // each live node's own line
}

// parseClusterNodes reads the reply of CLUSTER NODES:
//
//	<id> <ip:port@cport[,hostname]> <flags> <primary|-> <ping-sent> <pong-recv> <epoch> <link> <slot|range>…
func parseClusterNodes(text string) (*view, error) {
	v := &view{byPort: make(map[int][]entry)}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES: short line %q", line)
		}
		e := entry{id: f[0], flags: strings.Split(f[2], ",")}
		hostport, _, _ := strings.Cut(f[1], "@")
		if i := strings.LastIndexByte(hostport, ':'); i >= 0 {
			e.port, _ = strconv.Atoi(hostport[i+1:])
		}
		if f[3] != "-" {
			e.primaryID = f[3]
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				continue // a slot being imported or migrated
			}
			lo, hi, isRange := strings.Cut(s, "-")
			a, err1 := strconv.Atoi(lo)
			b, err2 := a, error(nil)
			if isRange {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("CLUSTER NODES: bad slot %q in %q", s, line)
			}
			e.slots = append(e.slots, slotRange{start: a, end: b, owner: e.id})
		}
		v.ranges = append(v.ranges, e.slots...)
		v.byPort[e.port] = append(v.byPort[e.port], e)
		if slices.Contains(e.flags, "myself") {
			v.self, found = e, true
		}
	}
	if !found {
		return nil, errors.New("CLUSTER NODES: no line flagged myself")
	}
	slices.SortFunc(v.ranges, func(a, b slotRange) int { return a.start - b.start })
	var b strings.Builder
	for _, r := range v.ranges {
		fmt.Fprintf(&b, "%d-%d=%s ", r.start, r.end, r.owner)
	}
	v.slotMap = b.String()
	return v, nil
}

// fetchView asks n for its cluster state and checks what n alone can tell:
// state ok, every slot assigned and served, and, for a replica, a link to
// its primary that is up and done syncing.
func fetchView(ctx context.Context, n *Node) (*view, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	pipe := n.Client().Pipeline()
	info := pipe.ClusterInfo(ctx)
	nodes := pipe.ClusterNodes(ctx)
	repl := pipe.Info(ctx, "replication")
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", n.Addr, err)
	}
	ci := parseInfo(info.Val())
	if st := ci["cluster_state"]; st != "ok" {
		return nil, fmt.Errorf("%s: cluster_state:%s", n.Addr, st)
	}
	for _, k := range []string{"cluster_slots_assigned", "cluster_slots_ok"} {
		if ci[k] != strconv.Itoa(SlotCount) {
			return nil, fmt.Errorf("%s: %s:%s", n.Addr, k, ci[k])
		}
	}
	v, err := parseClusterNodes(nodes.Val())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.Addr, err)
	}
	if v.self.port != n.Port {
		return nil, fmt.Errorf("%s: CLUSTER NODES says myself is port %d", n.Addr, v.self.port)
	}
	if v.self.primaryID != "" {
		ri := parseInfo(repl.Val())
		if ri["master_link_status"] != "up" || ri["master_sync_in_progress"] != "0" {
			return nil, fmt.Errorf("%s: replica not synced: master_link_status:%s master_sync_in_progress:%s",
				n.Addr, ri["master_link_status"], ri["master_sync_in_progress"])
		}
	}
	return v, nil
}

// check looks once at every live node and returns the topology if the
// cluster is healthy among them, or the first reason it is not.
func (c *Cluster) check(ctx context.Context) (*topology, error) {
	live := c.liveNodes()
	if len(live) == 0 {
		return nil, errors.New("no live node")
	}
	views := make([]*view, len(live))
	self := make(map[int]entry, len(live))
	liveIDs := make(map[string]bool, len(live))
	for i, n := range live {
		v, err := fetchView(ctx, n)
		if err != nil {
			return nil, err
		}
		views[i] = v
		self[n.Port] = v.self
		liveIDs[v.self.id] = true
	}
	for i, v := range views {
		n := live[i]
		if v.slotMap != views[0].slotMap {
			return nil, fmt.Errorf("%s and %s disagree on the slot map", n.Addr, live[0].Addr)
		}
		for _, m := range live {
			es := v.byPort[m.Port]
			if len(es) != 1 {
				return nil, fmt.Errorf("%s knows %d nodes on %s, want 1", n.Addr, len(es), m.Addr)
			}
			e, want := es[0], self[m.Port]
			for _, bad := range []string{"fail", "fail?", "handshake", "noaddr"} {
				if slices.Contains(e.flags, bad) {
					return nil, fmt.Errorf("%s sees %s as %s", n.Addr, m.Addr, strings.Join(e.flags, ","))
				}
			}
			if e.id != want.id || e.primaryID != want.primaryID {
				return nil, fmt.Errorf("%s sees %s as %s (primary %q), but it says %s (primary %q)",
					n.Addr, m.Addr, e.id, e.primaryID, want.id, want.primaryID)
			}
		}
	}
	for _, r := range views[0].ranges {
		if !liveIDs[r.owner] {
			return nil, fmt.Errorf("slots %d-%d belong to %s, which is not a live node", r.start, r.end, r.owner)
		}
	}
	return &topology{byPort: self}, nil
}

// WaitHealthy polls until every live node (running, not paused) reports
// cluster_state:ok with all 16384 slots assigned and served, all live nodes
// agree on the slot map and on each other's roles and none sees another as
// failing, every slot belongs to a live node, and every live replica has
// synced with its primary. Without a deadline on ctx, Config.Timeout bounds
// the wait. The error names the last reason the cluster was not healthy.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx, c.s.Timeout)
	defer cancel()
	began := time.Now()
	if _, err := c.waitHealthy(ctx); err != nil {
		return err
	}
	c.s.log.printf("cluster healthy after %v", since(began))
	return nil
}

func (c *Cluster) waitHealthy(ctx context.Context) (*topology, error) {
	var t *topology
	err := poll(ctx, "cluster not healthy", func() error {
		var err error
		t, err = c.check(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	c.setTopology(t)
	return t, nil
}

func (c *Cluster) setTopology(t *topology) {
	c.mu.Lock()
	c.topo = t
	c.mu.Unlock()
}

// WaitNewPrimary waits, after old was killed or paused, until one of its
// replicas (as of the last healthy check) has been promoted and the cluster
// is healthy again (see WaitHealthy), and returns the new primary. Without a
// deadline on ctx, Config.Timeout bounds the wait.
func (c *Cluster) WaitNewPrimary(ctx context.Context, old *Node) (*Node, error) {
	ctx, cancel := withDefaultTimeout(ctx, c.s.Timeout)
	defer cancel()
	candidates := c.ReplicasOf(old)
	if len(candidates) == 0 {
		return nil, fmt.Errorf("localredis: %s has no replica to promote", old.Addr)
	}
	began := time.Now()
	var promoted *Node
	err := poll(ctx, "no replica of "+old.Addr+" promoted", func() error {
		t, err := c.check(ctx)
		if err != nil {
			return err
		}
		for _, r := range candidates {
			if e, ok := t.byPort[r.Port]; ok && e.primaryID == "" && len(e.slots) > 0 {
				promoted = r
				c.setTopology(t)
				return nil
			}
		}
		return errors.New("cluster healthy, but none of the replicas is a primary")
	})
	if err != nil {
		return nil, err
	}
	c.s.log.printf("%s replaced %s as primary, cluster healthy %v after the call", promoted.Addr, old.Addr, since(began))
	return promoted, nil
}

// poll calls f until it returns nil or ctx ends; the error then wraps
// ctx.Err() and quotes f's last error.
func poll(ctx context.Context, what string, f func() error) error {
	for {
		last := f()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localredis: %s: %w; last: %v", what, ctx.Err(), last)
		case <-time.After(pollEvery):
		}
	}
}
