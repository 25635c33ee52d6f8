package localredis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelConfig says what StartSentinel starts. The zero value is one
// primary with one replica, watched by three sentinels (quorum 2) that fail
// it over 1s after it stops answering, on free ports in a new temporary
// folder.
type SentinelConfig struct {
	// Dir is the working folder, with one sub-folder per server (node-0 for
	// the first primary, node-1… for the replicas, sentinel-0…). "" means a
	// new temporary folder, removed by Stop.
	Dir string
	// MasterName is the name the sentinels know the primary by, the NAME of
	// `sluice serve --sentinel NAME@…`. "" means "mymaster".
	MasterName string
	// Replicas is the number of replicas of the primary. 0 means 1; -1
	// means none (then nothing can be failed over).
	Replicas int
	// Sentinels is the number of redis-sentinel processes. 0 means 3.
	Sentinels int
	// Quorum is the number of sentinels that must agree the primary is down
	// before a failover. 0 means a majority of Sentinels.
	Quorum int
	// DownAfter is down-after-milliseconds: how long the primary may not
	// answer before a sentinel thinks it down. 0 means 1s.
	DownAfter time.Duration
	// FailoverTimeout is failover-timeout: among other things, how long a
	// failover may take before it is aborted, and the pause before the same
	// primary is failed over again. 0 means 3s: small, so that a failover
	// the sentinels gave up on is tried again soon, yet enough for a loaded
	// machine to promote a replica before the sentinels give up.
	FailoverTimeout time.Duration
	// Password, when not "", is the requirepass (and masterauth) of the
	// primary and replicas, and the auth-pass the sentinels use with them.
	Password string
	// SentinelPassword, when not "", is the requirepass of the sentinels
	// (and the sentinel-pass they use with each other).
	SentinelPassword string
	// Log receives one line per step. nil discards them.
	Log io.Writer
	// Timeout bounds StartSentinel, Restart and WaitNewPrimary when their
	// context has no deadline. 0 means 60s.
	Timeout time.Duration
	// RedisServer and RedisSentinel are the binaries to run. "" means
	// "redis-server" and "redis-sentinel" looked up on PATH.
	RedisServer   string
	RedisSentinel string
}

const (
	defaultMasterName      = "mymaster"
	defaultSentinels       = 3
	defaultDownAfter       = time.Second
	defaultFailoverTimeout = 3 * time.Second
)

func (cfg SentinelConfig) resolve() (SentinelConfig, int, error) {
	replicas := cfg.Replicas
	switch {
	case cfg.Replicas == 0:
		replicas = 1
	case cfg.Replicas == -1:
		replicas = 0
	case cfg.Replicas < 0:
		return cfg, 0, fmt.Errorf("localredis: Replicas must be -1 (none), 0 (default 1) or positive, got %d", cfg.Replicas)
	}
	if cfg.MasterName == "" {
		cfg.MasterName = defaultMasterName
	}
	if strings.ContainsAny(cfg.MasterName, " \t\r\n\"'@,") {
		return cfg, 0, fmt.Errorf("localredis: MasterName %q must not hold spaces, quotes, '@' or ','", cfg.MasterName)
	}
	switch {
	case cfg.Sentinels == 0:
		cfg.Sentinels = defaultSentinels
	case cfg.Sentinels < 0:
		return cfg, 0, fmt.Errorf("localredis: Sentinels must not be negative, got %d", cfg.Sentinels)
	}
	switch {
	case cfg.Quorum == 0:
		cfg.Quorum = cfg.Sentinels/2 + 1
	case cfg.Quorum < 0 || cfg.Quorum > cfg.Sentinels:
		return cfg, 0, fmt.Errorf("localredis: Quorum must be in 1..Sentinels (%d), got %d", cfg.Sentinels, cfg.Quorum)
	}
	if cfg.DownAfter == 0 {
		cfg.DownAfter = defaultDownAfter
	}
	if cfg.FailoverTimeout == 0 {
		cfg.FailoverTimeout = defaultFailoverTimeout
	}
	if cfg.DownAfter < time.Millisecond || cfg.FailoverTimeout < time.Millisecond {
		return cfg, 0, fmt.Errorf("localredis: DownAfter and FailoverTimeout must be at least 1ms, got %v and %v", cfg.DownAfter, cfg.FailoverTimeout)
	}
	for _, pw := range []string{cfg.Password, cfg.SentinelPassword} {
		if strings.ContainsAny(pw, " \t\r\n\"'") {
			return cfg, 0, errors.New("localredis: passwords must not hold spaces or quotes")
		}
	}
	return cfg, replicas, nil
}

// CheckSentinelBinaries reports ErrNoRedis, naming the binary, when
// redis-server or redis-sentinel cannot be found; "" means on PATH.
func CheckSentinelBinaries(serverBin, sentinel string) error {
	_, err := lookBin(serverBin, "redis-server")
	if err == nil {
		_, err = lookBin(sentinel, "redis-sentinel")
	}
	return err
}

// Sentinel is one primary with its replicas, watched by redis-sentinel
// processes, as StartSentinel started them: the setup of Redis users who
// want failover without a Redis Cluster. Its methods are safe for
// concurrent use.
type Sentinel struct {
	s        *settings
	cfg      SentinelConfig // resolved
	replicas int
	bin      string // redis-sentinel
	dir      string
	ownsDir  bool
	data     []*Node // the first primary, then the replicas
	watchers []*Node // the sentinels

	mu      sync.Mutex
	primary *Node // as of the last check
	stopped bool
}

// StartSentinel starts the primary and its replicas, waits until every
// replica has synced, then starts the sentinels and waits until each of them
// knows every replica and every other sentinel, so that a failover can
// happen from the moment it returns. On error it stops whatever it started.
// Without a deadline on ctx, cfg.Timeout bounds it.
func StartSentinel(ctx context.Context, cfg SentinelConfig) (*Sentinel, error) {
	rc, replicas, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	s, err := Config{Log: cfg.Log, Timeout: cfg.Timeout, RedisServer: cfg.RedisServer, Replicas: -1}.resolve(false)
	if err != nil {
		return nil, err
	}
	bin, err := lookBin(cfg.RedisSentinel, "redis-sentinel")
	if err != nil {
		return nil, err
	}
	ctx, cancel := withDefaultTimeout(ctx, s.Timeout)
	defer cancel()
	dir, ownsDir, err := prepareDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	g := &Sentinel{s: s, cfg: rc, replicas: replicas, bin: bin, dir: dir, ownsDir: ownsDir}
	began := time.Now()
	for attempt := 1; attempt <= startAttempts; attempt++ {
		if err = g.start(ctx); err == nil || !errors.Is(err, ErrPortInUse) || ctx.Err() != nil {
			break
		}
		s.log.printf("lost a race for a port (attempt %d): %v", attempt, firstLine(err))
	}
	if err != nil {
		return nil, errors.Join(err, g.Stop())
	}
	s.log.printf("sentinel group %s ready in %v: primary %s, %d replica(s), sentinels %s",
		g.Flag(), since(began), g.data[0].Addr, replicas, strings.Join(g.SentinelAddrs(), ","))
	return g, nil
}

func (g *Sentinel) start(ctx context.Context) error {
	for _, n := range append(g.watchers, g.data...) {
		_ = n.Kill()
	}
	g.data, g.watchers = nil, nil
	ports, err := freePorts(1 + g.replicas + g.cfg.Sentinels)
	if err != nil {
		return err
	}
	primary := ports[0]
	for i, p := range ports[:1+g.replicas] {
		n := newNode(g.s, filepath.Join(g.dir, "node-"+strconv.Itoa(i)), p, false)
		if i > 0 {
			n.tail = append(n.tail, "--replicaof", "127.0.0.1", strconv.Itoa(primary))
		}
		if pw := g.cfg.Password; pw != "" {
			n.password = pw
			n.tail = append(n.tail, "--requirepass", pw, "--masterauth", pw)
		}
		g.data = append(g.data, n)
	}
	if err := g.spawnAll(ctx, g.data); err != nil {
		return err
	}
	g.primary = g.data[0]
	if err := g.waitSynced(ctx); err != nil {
		return err
	}
	for i, p := range ports[1+g.replicas:] {
		n := newNode(g.s, filepath.Join(g.dir, "sentinel-"+strconv.Itoa(i)), p, false)
		n.bin, n.password = g.bin, g.cfg.SentinelPassword
		conf := filepath.Join(n.Dir, "sentinel.conf")
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			return fmt.Errorf("localredis: %w", err)
		}
		if err := os.WriteFile(conf, []byte(g.sentinelConf(primary)), 0o600); err != nil {
			return fmt.Errorf("localredis: %w", err)
		}
		n.head = []string{conf}
		g.watchers = append(g.watchers, n)
	}
	if err := g.spawnAll(ctx, g.watchers); err != nil {
		return err
	}
	for _, w := range g.watchers {
		if err := w.Client().Do(ctx, append([]any{"SENTINEL", "DEBUG"}, sentinelDebug...)...).Err(); err != nil {
			return fmt.Errorf("localredis: %s: SENTINEL DEBUG: %w", w.Addr, err)
		}
	}
	return g.waitWatching(ctx)
}

// sentinelDebug are the sentinels' internal periods (SENTINEL DEBUG, Redis
// ≥ 7.0), shortened so that they converge in seconds on a busy machine:
// INFO to every server each second instead of each 10s (an old primary
// that is back is demoted in about 2s instead of 10s), hello messages each
// 500ms instead of 2s, and TILT (a sentinel pausing for 30s because its
// timer ran late) only after a 5s stall, for 5s. The failover itself still
// follows DownAfter, Quorum and FailoverTimeout.
var sentinelDebug = []any{"INFO-PERIOD", 1000, "PUBLISH-PERIOD", 500, "TILT-TRIGGER", 5000, "TILT-PERIOD", 5000}

// sentinelConf is a sentinel's configuration file; the sentinel rewrites it
// with what it learns.
func (g *Sentinel) sentinelConf(primaryPort int) string {
	name := g.cfg.MasterName
	var b strings.Builder
	fmt.Fprintf(&b, "sentinel monitor %s 127.0.0.1 %d %d\n", name, primaryPort, g.cfg.Quorum)
	fmt.Fprintf(&b, "sentinel down-after-milliseconds %s %d\n", name, g.cfg.DownAfter.Milliseconds())
	fmt.Fprintf(&b, "sentinel failover-timeout %s %d\n", name, g.cfg.FailoverTimeout.Milliseconds())
	fmt.Fprintf(&b, "sentinel parallel-syncs %s 1\n", name)
	if pw := g.cfg.Password; pw != "" {
		fmt.Fprintf(&b, "sentinel auth-pass %s %s\n", name, pw)
	}
	if pw := g.cfg.SentinelPassword; pw != "" {
		fmt.Fprintf(&b, "requirepass %s\nsentinel sentinel-pass %s\n", pw, pw)
	}
	return b.String()
}

func (g *Sentinel) spawnAll(ctx context.Context, nodes []*Node) error {
	for _, n := range nodes {
		removeData(n.Dir)
		for _, name := range []string{"redis.log", "redis.out"} {
			_ = os.Remove(filepath.Join(n.Dir, name))
		}
		n.mu.Lock()
		err := n.spawn()
		n.mu.Unlock()
		if err != nil {
			return err
		}
	}
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.waitReady(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitSynced polls the primary until every replica is online in its INFO
// replication.
func (g *Sentinel) waitSynced(ctx context.Context) error {
	p := g.data[0]
	return poll(ctx, "waiting for the replicas of "+p.Addr+" to sync", func() error {
		info, err := p.Client().Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		online := 0
		for k, v := range parseInfo(info) {
			if strings.HasPrefix(k, "slave") && strings.Contains(v, "state=online") {
				online++
			}
		}
		if online != g.replicas {
			return fmt.Errorf("%d of %d replicas online", online, g.replicas)
		}
		return nil
	})
}

// waitWatching polls every sentinel until it knows the primary, every
// replica and every other sentinel: before that a failover may find no
// replica to promote or no quorum.
func (g *Sentinel) waitWatching(ctx context.Context) error {
	return poll(ctx, "waiting for the sentinels to watch "+g.cfg.MasterName, func() error {
		for _, w := range g.watchers {
			m, err := w.Client().Do(ctx, "SENTINEL", "MASTER", g.cfg.MasterName).Result()
			if err != nil {
				return fmt.Errorf("%s: %w", w.Addr, err)
			}
			f := fieldMap(m)
			if f["num-slaves"] != strconv.Itoa(g.replicas) || f["num-other-sentinels"] != strconv.Itoa(len(g.watchers)-1) {
				return fmt.Errorf("%s knows %s replicas and %s other sentinels", w.Addr, f["num-slaves"], f["num-other-sentinels"])
			}
		}
		return nil
	})
}

// fieldMap reads a RESP2 reply of alternating names and values, as
// SENTINEL MASTER gives, into a map; anything else gives an empty map.
func fieldMap(v any) map[string]string {
	m := map[string]string{}
	switch x := v.(type) {
	case []any:
		for i := 0; i+1 < len(x); i += 2 {
			m[fmt.Sprint(x[i])] = fmt.Sprint(x[i+1])
		}
	case map[any]any:
		for k, v := range x {
			m[fmt.Sprint(k)] = fmt.Sprint(v)
		}
	}
	return m
}

// MasterName is the name the sentinels know the primary by.
func (g *Sentinel) MasterName() string { return g.cfg.MasterName }

// SentinelAddrs are the sentinels' "127.0.0.1:port".
func (g *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(g.watchers))
	for i, w := range g.watchers {
		addrs[i] = w.Addr
	}
	return addrs
}

// Flag is NAME@host:port,host:port…, the argument of `sluice serve
// --sentinel`.
func (g *Sentinel) Flag() string {
	return g.cfg.MasterName + "@" + strings.Join(g.SentinelAddrs(), ",")
}

// Nodes returns the primary and replicas in the order they were started:
// the first primary, then the replicas.
func (g *Sentinel) Nodes() []*Node { return slices.Clone(g.data) }

// Sentinels returns the redis-sentinel processes. Their Client speaks to a
// sentinel (SENTINEL … commands).
func (g *Sentinel) Sentinels() []*Node { return slices.Clone(g.watchers) }

// Primary returns the primary as of the last check (StartSentinel,
// WaitNewPrimary).
func (g *Sentinel) Primary() *Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.primary
}

// Replicas returns the nodes other than Primary, in start order.
func (g *Sentinel) Replicas() []*Node {
	p := g.Primary()
	var out []*Node
	for _, n := range g.data {
		if n != p {
			out = append(out, n)
		}
	}
	return out
}

// PrimaryAddrs asks every live sentinel for the primary's address (SENTINEL
// GET-MASTER-ADDR-BY-NAME), in the order of Sentinels; a sentinel that
// does not answer gives "".
func (g *Sentinel) PrimaryAddrs(ctx context.Context) []string {
	out := make([]string, len(g.watchers))
	for i, w := range g.watchers {
		if !w.live() {
			continue
		}
		a, err := w.Client().Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", g.cfg.MasterName).StringSlice()
		if err == nil && len(a) == 2 {
			out[i] = net.JoinHostPort(a[0], a[1])
		}
	}
	return out
}

// WaitNewPrimary polls until every live sentinel names the same primary,
// other than old, and that node says it is a primary (ROLE). It returns the
// node, now also Primary. Without a deadline on ctx, Timeout bounds it.
func (g *Sentinel) WaitNewPrimary(ctx context.Context, old *Node) (*Node, error) {
	ctx, cancel := withDefaultTimeout(ctx, g.s.Timeout)
	defer cancel()
	var found *Node
	err := poll(ctx, "waiting for a primary other than "+old.Addr, func() error {
		addrs := g.PrimaryAddrs(ctx)
		var addr string
		for _, a := range addrs {
			if a == "" {
				continue
			}
			if addr != "" && a != addr {
				return fmt.Errorf("sentinels disagree: %v", addrs)
			}
			addr = a
		}
		if addr == "" || addr == old.Addr {
			return fmt.Errorf("sentinels name %v", addrs)
		}
		i := slices.IndexFunc(g.data, func(n *Node) bool { return n.Addr == addr })
		if i < 0 {
			return fmt.Errorf("sentinels name %s, not a node of this group", addr)
		}
		role, err := g.data[i].Client().Do(ctx, "ROLE").Slice()
		if err != nil || len(role) == 0 || role[0] != "master" {
			return fmt.Errorf("%s: ROLE %v %v", addr, role, err)
		}
		found = g.data[i]
		return nil
	})
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.primary = found
	g.mu.Unlock()
	g.s.log.printf("sentinels name %s the primary of %s (was %s)", found.Addr, g.cfg.MasterName, old.Addr)
	return found, nil
}

// Failover asks a live sentinel for SENTINEL FAILOVER: promote a replica
// without waiting for the primary to fail. While the sentinel answers
// INPROG (the last failover is still reconfiguring replicas) or NOGOODSLAVE
// (no replica it trusts yet, e.g. one just reconfigured) it asks again,
// until ctx ends; without a deadline on ctx, Timeout bounds it. Follow it
// with WaitNewPrimary.
func (g *Sentinel) Failover(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx, g.s.Timeout)
	defer cancel()
	for {
		i := slices.IndexFunc(g.watchers, (*Node).live)
		if i < 0 {
			return errors.New("localredis: SENTINEL FAILOVER: no live sentinel")
		}
		w := g.watchers[i]
		err := w.Client().Do(ctx, "SENTINEL", "FAILOVER", g.cfg.MasterName).Err()
		if err == nil {
			g.s.log.printf("SENTINEL FAILOVER %s on %s", g.cfg.MasterName, w.Addr)
			return nil
		}
		if !redis.HasErrorPrefix(err, "INPROG") && !redis.HasErrorPrefix(err, "NOGOODSLAVE") {
			return fmt.Errorf("localredis: SENTINEL FAILOVER %s on %s: %w", g.cfg.MasterName, w.Addr, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localredis: SENTINEL FAILOVER %s on %s: %w; last: %v", g.cfg.MasterName, w.Addr, ctx.Err(), err)
		case <-time.After(pollEvery):
		}
	}
}

// Stop ends every process (sentinels first, so that they do not fail over
// a primary that is only being stopped): SIGTERM, then SIGKILL after a few
// seconds, by process, never by name. It closes the clients and removes the
// folder if StartSentinel made it. Stop is idempotent.
func (g *Sentinel) Stop() error {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return nil
	}
	g.stopped = true
	g.mu.Unlock()
	var errs []error
	for _, group := range [][]*Node{g.watchers, g.data} {
		gerrs := make([]error, len(group))
		var wg sync.WaitGroup
		for i, n := range group {
			wg.Go(func() { gerrs[i] = n.terminate(5 * time.Second) })
		}
		wg.Wait()
		errs = append(errs, gerrs...)
	}
	for _, n := range append(g.watchers, g.data...) {
		n.closeClient()
	}
	if g.ownsDir {
		if err := os.RemoveAll(g.dir); err != nil {
			errs = append(errs, fmt.Errorf("localredis: %w", err))
		}
	}
	g.s.log.printf("stopped %d servers and %d sentinels", len(g.data), len(g.watchers))
	return errors.Join(errs...)
}
