package cluster

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/lua"
)

// Config configures a Store. Exactly one of Addrs and URL is set.
type Config struct {
	// Addrs are Redis Cluster seed nodes, host:port.
	Addrs []string
	// URL is a single Redis node, redis://[user:pass@]host:port[/db].
	URL string
	// Timeout bounds dialing, reading and writing one batch; 0 means 50ms.
	// The caller's context deadline, when earlier, wins.
	Timeout time.Duration
	// PoolSize is connections per node; 0 means go-redis's default.
	PoolSize int
	// BreakerThreshold is the consecutive failures that open a node's
	// circuit breaker; 0 means 5.
	BreakerThreshold int
	// BreakerCooldown is how long an open breaker fails fast before it lets
	// one probe through; 0 means 1s.
	BreakerCooldown time.Duration
}

// Store is a limit.Store on Redis. It is safe for concurrent use.
type Store struct {
	cc     *redis.ClusterClient // nil for a single node
	single *redis.Client
	cfg    Config
	sha    string

	mu       sync.Mutex
	breakers map[string]*breaker
	direct   map[string]*redis.Client // MOVED/ASK targets, by address
	opts     *redis.Options           // for direct clients
}

var _ limit.Store = (*Store)(nil)

// New builds a Store; it does not connect until the first request.
func New(cfg Config) (*Store, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 50 * time.Millisecond
	}
	if cfg.BreakerThreshold <= 0 {
		cfg.BreakerThreshold = 5
	}
	if cfg.BreakerCooldown <= 0 {
		cfg.BreakerCooldown = time.Second
	}
	sum := sha1.Sum([]byte(lua.TokenBucket))
	s := &Store{cfg: cfg, sha: hex.EncodeToString(sum[:]), breakers: map[string]*breaker{}, direct: map[string]*redis.Client{}}
	switch {
	case len(cfg.Addrs) > 0 && cfg.URL != "":
		return nil, errors.New("cluster: set Addrs or URL, not both")
	case len(cfg.Addrs) > 0:
		s.cc = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 cfg.Addrs,
			DialTimeout:           cfg.Timeout,
			ReadTimeout:           cfg.Timeout,
			WriteTimeout:          cfg.Timeout,
			ContextTimeoutEnabled: true,
			MaxRetries:            -1, // never replay: a timed-out script may have run
			PoolSize:              cfg.PoolSize,
			DisableIdentity:       true,
		})
		s.opts = &redis.Options{
			DialTimeout: cfg.Timeout, ReadTimeout: cfg.Timeout, WriteTimeout: cfg.Timeout,
			ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: cfg.PoolSize, DisableIdentity: true,
		}
	case cfg.URL != "":
		o, err := redis.ParseURL(cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = cfg.Timeout, cfg.Timeout, cfg.Timeout
		o.ContextTimeoutEnabled = true
		o.MaxRetries = -1
		o.DisableIdentity = true
		if cfg.PoolSize > 0 {
			o.PoolSize = cfg.PoolSize
		}
		s.single = redis.NewClient(o)
	default:
		return nil, errors.New("cluster: no Redis address")
	}
	return s, nil
}

// Close closes every connection.
func (s *Store) Close() error {
	s.mu.Lock()
	for _, c := range s.direct {
		_ = c.Close()
	}
	s.mu.Unlock()
	if s.cc != nil {
		return s.cc.Close()
	}
	return s.single.Close()
}

// Ping checks that every primary answers, for start-up and readiness.
func (s *Store) Ping(ctx context.Context) error {
	if s.cc != nil {
		return s.cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return c.Ping(ctx).Err()
		})
	}
	return s.single.Ping(ctx).Err()
}

// item is one request in flight: where it goes and how.
type item struct {
	idx   int    // index in the batch
	key   string // Redis key
	args  []any
	node  *redis.Client
	ask   bool // send ASKING first
	eval  bool // NOSCRIPT seen: send the whole script
	retry bool // redirected or NOSCRIPT: go round again
}

// attempts bounds the rounds of one batch: first try, then NOSCRIPT or a
// redirection, then one more redirection during a migration.
const attempts = 3

// Do decides a batch: one pipeline per node, the nodes in parallel.
func (s *Store) Do(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	items := make([]*item, 0, len(reqs))
	for i := range reqs {
		r := &reqs[i]
		b, err := r.Policy.Bucket()
		if err != nil {
			out[i] = limit.Result{Err: err}
			continue
		}
		peek := "0"
		if r.Op == limit.OpPeek {
			peek = "1"
		}
		it := &item{idx: i, key: Key(r.Key), args: []any{b.Capacity, b.Refill, b.Scale, r.Cost, peek}}
		it.node, err = s.route(ctx, it.key)
		if err != nil {
			out[i] = limit.Result{Err: s.unavailable("", err)}
			continue
		}
		items = append(items, it)
	}
	for range attempts {
		if len(items) == 0 {
			return
		}
		s.round(ctx, items, out)
		pending := items[:0]
		for _, it := range items {
			if it.retry {
				it.retry = false
				pending = append(pending, it)
			}
		}
		items = pending
	}
	for _, it := range items {
		out[it.idx] = limit.Result{Err: fmt.Errorf("cluster: %s: too many redirections", it.key)}
	}
}

func (s *Store) route(ctx context.Context, key string) (*redis.Client, error) {
	if s.cc == nil {
		return s.single, nil
	}
	return s.cc.MasterForKey(ctx, key)
}

// round sends every item once, grouped by node.
func (s *Store) round(ctx context.Context, items []*item, out []limit.Result) {
	groups := map[*redis.Client][]*item{}
	for _, it := range items {
		groups[it.node] = append(groups[it.node], it)
	}
	if len(groups) == 1 {
		for node, g := range groups {
			s.pipeline(ctx, node, g, out)
		}
		return
	}
	var wg sync.WaitGroup
	for node, g := range groups {
		wg.Go(func() { s.pipeline(ctx, node, g, out) })
	}
	wg.Wait()
}

// pipeline runs one node's items in one round trip and files each reply.
func (s *Store) pipeline(ctx context.Context, node *redis.Client, items []*item, out []limit.Result) {
	addr := node.Options().Addr
	br := s.breaker(addr)
	if !br.allow(time.Now()) {
		err := &limit.UnavailableError{Node: addr, Err: ErrCircuitOpen}
		for _, it := range items {
			out[it.idx] = limit.Result{Err: err}
		}
		return
	}
	cmds := make([]*redis.Cmd, len(items))
	_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, it := range items {
			if it.ask {
				p.Do(ctx, "asking")
			}
			keys := []string{it.key}
			if it.eval {
				cmds[i] = p.Eval(ctx, lua.TokenBucket, keys, it.args...)
			} else {
				cmds[i] = p.EvalSha(ctx, s.sha, keys, it.args...)
			}
		}
		return nil
	})
	reached := true
	for i, it := range items {
		err := cmds[i].Err()
		it.ask = false
		switch {
		case err == nil:
			out[it.idx] = decode(cmds[i].Val())
		case redis.HasErrorPrefix(err, "NOSCRIPT"):
			it.eval, it.retry = true, true
		case s.redirect(it, err):
			it.retry = true
		case isConnectivity(err):
			reached = false
			out[it.idx] = limit.Result{Err: s.unavailable(addr, err)}
		default:
			out[it.idx] = limit.Result{Err: fmt.Errorf("redis %s: %w", addr, err)}
		}
	}
	br.report(reached, time.Now())
}

// redirect points it at the node a MOVED or ASK error names.
func (s *Store) redirect(it *item, err error) bool {
	addr, moved := redis.IsMovedError(err)
	if !moved {
		var ask bool
		if addr, ask = redis.IsAskError(err); !ask {
			return false
		}
		it.ask = true
	} else if s.cc != nil {
		s.cc.ReloadState(context.Background())
	}
	it.node = s.directClient(addr)
	return it.node != nil
}

func (s *Store) directClient(addr string) *redis.Client {
	if s.cc == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.direct[addr]
	if c == nil {
		o := *s.opts
		o.Addr = addr
		c = redis.NewClient(&o)
		s.direct[addr] = c
	}
	return c
}

func (s *Store) breaker(addr string) *breaker {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.breakers[addr]
	if b == nil {
		b = newBreaker(s.cfg.BreakerThreshold, s.cfg.BreakerCooldown)
		s.breakers[addr] = b
	}
	return b
}

// unavailable wraps a connectivity failure, and asks the cluster client to
// reload the slot map: a failover moves slots to a replica.
func (s *Store) unavailable(addr string, err error) error {
	if s.cc != nil {
		s.cc.ReloadState(context.Background())
	}
	return &limit.UnavailableError{Node: addr, Err: err}
}

// Reset deletes the bucket of key.
func (s *Store) Reset(ctx context.Context, key string, _ *limit.Policy) (bool, error) {
	var n int64
	var err error
	if s.cc != nil {
		n, err = s.cc.Del(ctx, Key(key)).Result()
	} else {
		n, err = s.single.Del(ctx, Key(key)).Result()
	}
	if err != nil {
		if isConnectivity(err) {
			return false, s.unavailable("", err)
		}
		return false, err
	}
	return n > 0, nil
}

// BreakerStates reports each known node's breaker: closed, open or half-open.
func (s *Store) BreakerStates() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]string, len(s.breakers))
	for addr, b := range s.breakers {
		m[addr] = b.stateName()
	}
	return m
}

// decode checks the script's reply shape: five integers.
func decode(v any) limit.Result {
	vals, ok := v.([]any)
	if !ok || len(vals) != 5 {
		return limit.Result{Err: fmt.Errorf("cluster: unexpected script reply %v", v)}
	}
	var n [5]int64
	for i, x := range vals {
		if n[i], ok = x.(int64); !ok {
			return limit.Result{Err: fmt.Errorf("cluster: unexpected script reply field %d: %v", i+1, x)}
		}
	}
	return limit.Result{
		Allowed: n[0] == 1, Limit: n[1], Remaining: n[2],
		RetryAfterMs: n[3], ResetAfterMs: n[4], DecidedBy: limit.ByStore,
	}
}

// isConnectivity tells "the network broke or the cluster is between
// states" from "Redis answered with an error".
func isConnectivity(err error) bool {
	if redis.IsClusterDownError(err) || redis.IsTryAgainError(err) || redis.IsLoadingError(err) ||
		redis.IsMasterDownError(err) || redis.IsReadOnlyError(err) ||
		redis.HasErrorPrefix(err, "BUSY") {
		return true
	}
	var re redis.Error
	return !errors.As(err, &re) // timeouts, refused, reset, EOF, pool errors
}
