package localredis

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of redis-server processes started by Start or
// Up. Its methods are safe for concurrent use.
type Cluster struct {
	s       *settings
	dir     string
	ownsDir bool
	nodes   []*Node    // by port
	record  bool       // keep StateFile; set by Up
	ns      *namespace // with Config.Netns; deleted by Stop

	mu      sync.Mutex
	topo    *topology // as of the last healthy check
	cc      *redis.ClusterClient
	stopped bool
}

// startAttempts bounds how often Start picks new free ports after losing a
// race for one.
const startAttempts = 5

// Start starts Primaries×(1+Replicas) cluster nodes, joins them with
// `redis-cli --cluster create`, and waits until the cluster is healthy (see
// WaitHealthy) and every replica has synced. On error it stops whatever it
// started. Without a deadline on ctx, Config.Timeout bounds it.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	return startCluster(ctx, cfg, false)
}

// startCluster is Start; with record set it keeps the state file for Down
// up to date from the moment the servers exist.
func startCluster(ctx context.Context, cfg Config, record bool) (*Cluster, error) {
	l, ctx, err := begin(ctx, cfg, true)
	if err != nil {
		return nil, err
	}
	defer l.done()
	c := &Cluster{s: l.s, dir: l.dir, ownsDir: l.ownsDir, record: record}
	if l.s.Netns {
		if c.ns, err = newNamespace(ctx, l.s); err != nil {
			return nil, errors.Join(err, c.Stop())
		}
	}
	if err := c.start(ctx); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	began := time.Now()
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		if err = c.startNodes(ctx); err == nil {
			break
		}
		if c.s.Port != 0 || c.ns != nil || !errors.Is(err, ErrPortInUse) || ctx.Err() != nil {
			return err
		}
		c.s.log.printf("lost a race for a port (attempt %d): %v", attempt, firstLine(err))
	}
	if err != nil {
		return err
	}
	// Recorded now, so that Down can stop the servers even if this process
	// dies before the cluster is formed.
	if err := c.saveState(); err != nil {
		return err
	}
	c.s.log.printf("%d nodes answer on %s…%s after %v", len(c.nodes), c.nodes[0].Addr, c.nodes[len(c.nodes)-1].Addr, since(began))

	created := time.Now()
	args := []string{"--cluster", "create"}
	for _, n := range c.nodes {
		args = append(args, n.Addr)
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(c.s.replicas), "--cluster-yes")
	cmd := exec.CommandContext(ctx, c.s.cli, args...)
	cmd.SysProcAttr = sysProcAttr(false)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("localredis: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.s.log.printf("redis-cli --cluster create took %v", since(created))

	healthy := time.Now()
	t, err := c.waitHealthy(ctx)
	if err != nil {
		return err
	}
	for _, n := range c.nodes {
		n.ID = t.byPort[n.Port].id
	}
	if err := c.saveState(); err != nil {
		return err
	}
	c.s.log.printf("cluster healthy %v after create; %d primaries with %d replica(s) each; started in %v",
		since(healthy), c.s.Primaries, c.s.replicas, since(began))
	return nil
}

// startNodes starts every node on new ports and waits until each answers.
func (c *Cluster) startNodes(ctx context.Context) error {
	// A failed attempt leaves processes behind: stop them first.
	for _, n := range c.nodes {
		_ = n.Kill()
	}
	c.nodes = nil
	var (
		ports []int
		hosts []string
		links []*veth
		err   error
	)
	if c.ns != nil {
		// Every node has an address of its own, so any ports are free;
		// distinct ones keep a node's port its name, as on loopback.
		first := c.s.Port
		if first == 0 {
			first = defaultNetnsPort
		}
		if hosts, links, err = c.ns.addLinks(ctx, c.s.nodeCount()); err != nil {
			return err
		}
		for i := range hosts {
			ports = append(ports, first+i)
		}
	} else if ports, err = c.s.ports(c.s.nodeCount()); err != nil {
		return err
	}
	for i, p := range ports {
		n := newNode(c.s, filepath.Join(c.dir, "node-"+strconv.Itoa(i)), p, true)
		if c.ns != nil {
			n = newNodeOn(c.s, n.Dir, hosts[i], p, true)
			n.link = links[i]
		}
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			return fmt.Errorf("localredis: %w", err)
		}
		// A stale nodes.conf would make the node remember an old cluster.
		removeData(n.Dir)
		for _, name := range []string{"nodes.conf", "redis.log", "redis.out"} {
			_ = os.Remove(filepath.Join(n.Dir, name))
		}
		c.nodes = append(c.nodes, n)
		n.mu.Lock()
		err := n.spawn()
		n.mu.Unlock()
		if err != nil {
			return err
		}
	}
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() { errs[i] = n.waitReady(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// prepareDir returns the working folder, making a temporary one for "".
// launch is what Start and StartSingle begin with: the settings, the
// folder (made by this launch when ownsDir) and done, which releases the
// start's deadline.
type launch struct {
	s       *settings
	dir     string
	ownsDir bool
	done    context.CancelFunc
}

// begin resolves cfg, prepares its folder and bounds ctx by cfg.Timeout
// unless ctx has a deadline. The caller must call done.
func begin(ctx context.Context, cfg Config, needCLI bool) (*launch, context.Context, error) {
	s, err := cfg.resolve(needCLI)
	if err != nil {
		return nil, ctx, err
	}
	dir, ownsDir, err := prepareDir(s.Dir)
	if err != nil {
		return nil, ctx, err
	}
	ctx, cancel := withDefaultTimeout(ctx, s.Timeout)
	return &launch{s: s, dir: dir, ownsDir: ownsDir, done: cancel}, ctx, nil
}

func prepareDir(dir string) (string, bool, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "localredis-")
		if err != nil {
			return "", false, fmt.Errorf("localredis: %w", err)
		}
		return d, true, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false, fmt.Errorf("localredis: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", false, fmt.Errorf("localredis: %w", err)
	}
	if st, err := ReadState(abs); err == nil && len(st.alive()) > 0 {
		return "", false, fmt.Errorf("%w: %s (pids %v); run Down on it first", ErrRunning, abs, st.alive())
	}
	return abs, false, nil
}

// Stop ends every node this Cluster started (SIGTERM, then SIGKILL after a
// few seconds), by its process, never by name, and waits until all have
// exited. It closes the clients, removes the state file if Up wrote it and
// the folder if Start made it. Stop is idempotent.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	cc := c.cc
	c.mu.Unlock()

	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() { errs[i] = n.terminate(5 * time.Second) })
	}
	wg.Wait()
	for _, n := range c.nodes {
		n.closeClient()
	}
	if cc != nil {
		_ = cc.Close()
	}
	if c.record && errors.Join(errs...) == nil {
		if err := os.Remove(filepath.Join(c.dir, StateFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("localredis: %w", err))
		}
	}
	if c.ns != nil && errors.Join(errs...) == nil {
		// Only once its servers are gone: a namespace with processes in
		// it outlives its name.
		if err := c.ns.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ownsDir {
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, fmt.Errorf("localredis: %w", err))
		}
	}
	c.s.log.printf("stopped %d nodes", len(c.nodes))
	return errors.Join(errs...)
}

// Netns is the name of the cluster's network namespace, as `ip netns`
// lists it, or "" for a cluster on loopback.
func (c *Cluster) Netns() string {
	if c.ns == nil {
		return ""
	}
	return c.ns.name
}

// Dir is the cluster's working folder.
func (c *Cluster) Dir() string { return c.dir }

// Nodes returns every node, primaries and replicas, in port order.
func (c *Cluster) Nodes() []*Node { return slices.Clone(c.nodes) }

// Addrs returns the Addr ("127.0.0.1:port", or a veth address with
// Config.Netns) of the primaries, as of the last
// healthy check (Start, WaitHealthy, WaitNewPrimary): a seed list for a
// cluster client or `sluice serve --cluster`.
func (c *Cluster) Addrs() []string {
	var addrs []string
	for _, n := range c.Primaries() {
		addrs = append(addrs, n.Addr)
	}
	return addrs
}

// Primaries returns the nodes that own slots, in port order, as of the last
// healthy check (Start, WaitHealthy, WaitNewPrimary).
func (c *Cluster) Primaries() []*Node {
	return c.nodesWhere(func(e entry) bool { return e.primaryID == "" })
}

// ReplicasOf returns the replicas of primary, in port order, as of the last
// healthy check (Start, WaitHealthy, WaitNewPrimary).
func (c *Cluster) ReplicasOf(primary *Node) []*Node {
	return c.nodesWhere(func(e entry) bool { return e.primaryID != "" && e.primaryID == primary.ID })
}

// nodesWhere returns the nodes whose line in the last healthy topology
// keep accepts, in port order; nil before the first healthy check.
func (c *Cluster) nodesWhere(keep func(entry) bool) []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return nil
	}
	var out []*Node
	for _, n := range c.nodes {
		if e, ok := c.topo.byPort[n.Port]; ok && keep(e) {
			out = append(out, n)
		}
	}
	return out
}

// liveNodes returns the nodes that are running and not paused.
func (c *Cluster) liveNodes() []*Node {
	var out []*Node
	for _, n := range c.nodes {
		if n.live() {
			out = append(out, n)
		}
	}
	return out
}

func (c *Cluster) nodeByAddr(addr string) *Node {
	for _, n := range c.nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// PrimaryForKey returns the node that owns the slot of key now, by the
// CLUSTER SHARDS of the first live node that answers. The slot follows the
// hash-tag rules (see Slot).
func (c *Cluster) PrimaryForKey(ctx context.Context, key string) (*Node, error) {
	slot := Slot(key)
	var errs []error
	for _, n := range c.liveNodes() {
		shards, err := Shards(ctx, n.Client())
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n.Addr, err))
			continue
		}
		for _, sh := range shards {
			if !sh.Has(slot) {
				continue
			}
			if owner := c.nodeByAddr(sh.Primary); owner != nil {
				return owner, nil
			}
			return nil, fmt.Errorf("localredis: slot %d of %q is owned by %s, not a node of this cluster", slot, key, sh.Primary)
		}
		return nil, fmt.Errorf("localredis: slot %d of %q has no owner in the CLUSTER SHARDS of %s", slot, key, n.Addr)
	}
	return nil, fmt.Errorf("localredis: no live node answered CLUSTER SHARDS: %w", errors.Join(errs...))
}

// ScriptFlushAll runs SCRIPT FLUSH on every live node, so that the next
// EVALSHA anywhere meets NOSCRIPT.
func (c *Cluster) ScriptFlushAll(ctx context.Context) error {
	return c.eachLive(ctx, func(ctx context.Context, n *Node) error {
		return n.Client().ScriptFlush(ctx).Err()
	})
}

// FlushAll runs FLUSHALL on every live primary, emptying the cluster
// between tests; replicas follow.
func (c *Cluster) FlushAll(ctx context.Context) error {
	return c.eachLive(ctx, func(ctx context.Context, n *Node) error {
		role, err := n.Client().Do(ctx, "ROLE").Slice()
		if err != nil {
			return err
		}
		if len(role) > 0 && role[0] == "master" {
			return n.Client().FlushAll(ctx).Err()
		}
		return nil
	})
}

func (c *Cluster) eachLive(ctx context.Context, f func(context.Context, *Node) error) error {
	live := c.liveNodes()
	errs := make([]error, len(live))
	var wg sync.WaitGroup
	for i, n := range live {
		wg.Go(func() {
			if err := f(ctx, n); err != nil {
				errs[i] = fmt.Errorf("localredis: %s: %w", n.Addr, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ClusterClient returns a go-redis cluster client seeded with every node,
// made on first use and closed by Stop.
func (c *Cluster) ClusterClient() *redis.ClusterClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cc == nil {
		var addrs []string
		for _, n := range c.nodes {
			addrs = append(addrs, n.Addr)
		}
		c.cc = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                    addrs,
			Protocol:                 2,
			DisableIdentity:          true,
			DialTimeout:              time.Second,
			ContextTimeoutEnabled:    true,
			MaintNotificationsConfig: maintOff(),
		})
	}
	return c.cc
}

// StartSingle starts one plain (non-cluster) redis-server, for tests of
// `sluice serve --redis`. Of cfg it uses Dir (the server's own folder; ""
// means a temporary one, removed by Stop), Port, Detach, Log, Timeout and
// RedisServer. Stop the server with Node.Stop.
func StartSingle(ctx context.Context, cfg Config) (*Node, error) {
	cfg.Primaries, cfg.Replicas, cfg.NodeTimeout, cfg.Netns = 0, 0, 0, false
	l, ctx, err := begin(ctx, cfg, false)
	if err != nil {
		return nil, err
	}
	defer l.done()
	s, dir, ownsDir := l.s, l.dir, l.ownsDir
	rmDir := ""
	if ownsDir {
		rmDir = dir
	}
	removeData(dir)
	for attempt := 1; ; attempt++ {
		var ports []int
		if ports, err = s.ports(1); err != nil {
			break
		}
		n := newNode(s, dir, ports[0], false)
		n.rmDir = rmDir
		n.mu.Lock()
		err = n.spawn()
		n.mu.Unlock()
		if err == nil {
			if err = n.waitReady(ctx); err == nil {
				s.log.printf("single server on %s (pid %d)", n.Addr, n.Pid)
				return n, nil
			}
		}
		_ = n.Kill()
		if s.Port != 0 || !errors.Is(err, ErrPortInUse) || attempt == startAttempts || ctx.Err() != nil {
			break
		}
	}
	if ownsDir {
		_ = os.RemoveAll(dir)
	}
	return nil, err
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
