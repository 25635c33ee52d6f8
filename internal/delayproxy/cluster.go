package delayproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
)

// Cluster is a Proxy in front of every node of a localredis.Cluster, the
// nodes announcing the proxies' ports: a cluster client seeded with Seeds
// learns the proxies from CLUSTER SLOTS and MOVED, so every command it
// sends crosses one. The cluster bus is not proxied (the nodes are all on
// one side of the link). Its methods are safe for concurrent use.
type Cluster struct {
	rc      *localredis.Cluster
	nodes   []*localredis.Node
	proxies []*Proxy // proxies[i] is in front of nodes[i]
}

// busPortOffset is where localredis puts a node's cluster bus: its client
// port + 10000 (see localredis.Node.Port).
const busPortOffset = 10000

// announceTimeout bounds the wait for the nodes to agree on the announced
// ports, when ctx has no deadline.
const announceTimeout = 30 * time.Second

// ProxyCluster starts a proxy with oneWay delay in front of every node of
// rc, primaries and replicas, sets each node's cluster-announce-port to its
// proxy's port (and cluster-announce-bus-port to its own bus port, so the
// bus is not redirected), and waits until every node answers CLUSTER SLOTS
// with proxy ports only and cluster_state:ok. Close undoes all of it.
//
// While proxied, rc.WaitHealthy and rc.PrimaryForKey do not recognise the
// nodes (they see the proxies' ports); a node restarted meanwhile announces
// its own port again.
func ProxyCluster(ctx context.Context, rc *localredis.Cluster, oneWay time.Duration) (*Cluster, error) {
	return ProxyClusterConfig(ctx, rc, Config{Delay: oneWay})
}

// ProxyClusterConfig is ProxyCluster with every proxy configured as cfg
// says (Delay, MaxInFlight, DialTimeout, Classify), except Listen (a free
// loopback port each) and Target (its node).
func ProxyClusterConfig(ctx context.Context, rc *localredis.Cluster, cfg Config) (*Cluster, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, announceTimeout)
		defer cancel()
	}
	c := &Cluster{rc: rc, nodes: rc.Nodes()}
	for _, n := range c.nodes {
		cfg.Listen, cfg.Target = "127.0.0.1:0", n.Addr
		p, err := Start(cfg)
		if err != nil {
			return nil, errors.Join(err, c.Close())
		}
		c.proxies = append(c.proxies, p)
	}
	if err := c.announce(ctx, true); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// Seeds are the proxies' addresses, one per node: the seed list for a
// cluster client or `sluice serve --cluster`.
func (c *Cluster) Seeds() []string {
	out := make([]string, len(c.proxies))
	for i, p := range c.proxies {
		out[i] = p.Addr()
	}
	return out
}

// Proxies returns the proxies, in the order of the cluster's Nodes.
func (c *Cluster) Proxies() []*Proxy { return append([]*Proxy(nil), c.proxies...) }

// ProxyOf returns the proxy in front of n, or nil.
func (c *Cluster) ProxyOf(n *localredis.Node) *Proxy {
	for i, m := range c.nodes {
		if m == n || m.Addr == n.Addr {
			return c.proxies[i]
		}
	}
	return nil
}

// SetDelay sets the one-way delay of every proxy (see Proxy.SetDelay).
func (c *Cluster) SetDelay(d time.Duration) { c.each(func(p *Proxy) { p.SetDelay(d) }) }

// Stall holds, or releases, every proxy's bytes (see Proxy.Stall).
func (c *Cluster) Stall(on bool) { c.each(func(p *Proxy) { p.Stall(on) }) }

// Cut resets, or stops resetting, every proxy's connections (see
// Proxy.Cut).
func (c *Cluster) Cut(on bool) { c.each(func(p *Proxy) { p.Cut(on) }) }

// Link returns the link named name of every proxy (see Proxy.Link), to
// delay, stall or cut some clients of the cluster and not others.
func (c *Cluster) Link(name string) Links {
	out := make(Links, len(c.proxies))
	for i, p := range c.proxies {
		out[i] = p.Link(name)
	}
	return out
}

// Links are links of several proxies, driven together.
type Links []*Link

// SetDelay sets every link's one-way delay.
func (ls Links) SetDelay(d time.Duration) {
	for _, l := range ls {
		l.SetDelay(d)
	}
}

// Stall holds, or releases, every link's bytes.
func (ls Links) Stall(on bool) {
	for _, l := range ls {
		l.Stall(on)
	}
}

// Cut resets, or stops resetting, every link's connections.
func (ls Links) Cut(on bool) {
	for _, l := range ls {
		l.Cut(on)
	}
}

func (c *Cluster) each(f func(*Proxy)) {
	for _, p := range c.proxies {
		f(p)
	}
}

// Close makes every running node announce its own ports again, waits
// until the nodes agree on them (at most 30s), and closes the proxies.
func (c *Cluster) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), announceTimeout)
	defer cancel()
	var errs []error
	if len(c.proxies) == len(c.nodes) {
		errs = append(errs, c.announce(ctx, false))
	}
	for _, p := range c.proxies {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// announce sets every running node's announced ports, to its proxy's when
// proxied, else back to its own (0), and waits until every running node's
// CLUSTER SLOTS names only the ports announced and cluster_state is ok.
func (c *Cluster) announce(ctx context.Context, proxied bool) error {
	want := make(map[int]bool, len(c.nodes))
	var live []*localredis.Node
	for i, n := range c.nodes {
		port, bus := 0, 0
		if proxied {
			port = proxyPort(c.proxies[i])
			bus = n.Port + busPortOffset
			want[port] = true
		} else {
			want[n.Port] = true
		}
		if !n.Running() || n.Paused() {
			continue
		}
		live = append(live, n)
		// The bus port first: a node whose announced port changes alone
		// would, on older Redis, derive its bus port from it.
		err := n.Client().ConfigSet(ctx, "cluster-announce-bus-port", strconv.Itoa(bus)).Err()
		if err == nil {
			err = n.Client().ConfigSet(ctx, "cluster-announce-port", strconv.Itoa(port)).Err()
		}
		if err != nil {
			return fmt.Errorf("delayproxy: %s: CONFIG SET cluster-announce-port: %w", n.Addr, err)
		}
	}
	var last error
	for {
		if last = agreed(ctx, live, want); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("delayproxy: the cluster did not announce the %s ports: %w; last: %v", map[bool]string{true: "proxies'", false: "nodes' own"}[proxied], ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// agreed is nil when every node of live says cluster_state:ok and names in
// CLUSTER SHARDS (as CLUSTER SLOTS did) only ports of want, else the first
// reason it is not.
func agreed(ctx context.Context, live []*localredis.Node, want map[int]bool) error {
	for _, n := range live {
		info, err := n.Client().ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: %w", n.Addr, err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster_state is not ok", n.Addr)
		}
		shards, err := localredis.Shards(ctx, n.Client())
		if err != nil {
			return fmt.Errorf("%s: %w", n.Addr, err)
		}
		for _, sh := range shards {
			for _, addr := range sh.Nodes {
				_, ps, _ := net.SplitHostPort(addr)
				if port, _ := strconv.Atoi(ps); !want[port] {
					return fmt.Errorf("%s: CLUSTER SHARDS names %s for slots %v", n.Addr, addr, sh.Slots)
				}
			}
		}
	}
	return nil
}

func proxyPort(p *Proxy) int {
	_, ps, _ := net.SplitHostPort(p.Addr())
	port, _ := strconv.Atoi(ps)
	return port
}
