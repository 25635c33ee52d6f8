package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/lua"
)

// Config configures a Store. Exactly one of Addrs, URL and SentinelAddrs
// is set.
type Config struct {
	// Addrs are Redis Cluster seed nodes, host:port.
	Addrs []string
	// URL is a single Redis node, redis://[user:pass@]host:port[/db], or
	// rediss://… for TLS.
	URL string
	// MasterName and SentinelAddrs (host:port) are a primary watched by
	// Redis Sentinel: the store asks the sentinels for the primary's address
	// and follows it through failovers (see sentinel.go).
	MasterName    string
	SentinelAddrs []string
	// SentinelUsername and SentinelPassword authenticate to the sentinels
	// (their own requirepass or ACL); "" means none. Username and Password
	// below authenticate to the primary. TLS applies to both.
	SentinelUsername, SentinelPassword string
	// TLS, when not nil, makes every connection to Redis use TLS with this
	// configuration: cluster nodes, the URL's node (whatever its scheme),
	// and the direct connections that follow MOVED and ASK. An empty
	// ServerName is the host of the address dialed (the URL's host for a
	// single node). nil means plain TCP, or go-redis's defaults for rediss.
	TLS *tls.Config
	// Username and Password authenticate to Redis (AUTH); they override the
	// URL's. "" means none (or the URL's).
	Username, Password string
	// Timeout is the deadline of the calls made without one of their own:
	// go-redis's slot-map reloads, which run under context.Background, and
	// requests whose context has no deadline; 0 means limit.DefaultTimeout.
	Timeout time.Duration
	// MaxTimeout bounds dialing, reading and writing on a connection to
	// Redis, whatever the context; 0 means Timeout. A call's context
	// deadline, when earlier, governs, and a pipeline waits for the latest
	// deadline of its requests, so set it to the longest deadline callers
	// may use — a timeout raised at run time included — or it cuts theirs
	// short. (go-redis with ContextTimeoutEnabled sets each socket deadline
	// to the earlier of the context's and now plus these timeouts.)
	MaxTimeout time.Duration
	// PoolSize is connections per node; 0 means go-redis's default. Each
	// of a node's Pipelines holds one of them for good (link.go), so it is
	// raised to Pipelines + 1 at least: one more for the breaker's PING
	// and the store's other commands.
	PoolSize int
	// BreakerThreshold is the consecutive failures that open a node's
	// circuit breaker; 0 means 5.
	BreakerThreshold int
	// BreakerCooldown is how long an open breaker fails fast before it lets
	// one probe through; 0 means 1s.
	BreakerCooldown time.Duration
	// Pipelines is the number of pipelines in flight per node; 0 means 2.
	// Requests that arrive while they are busy wait and go out together in
	// the next one, so batches grow with load and a lone request goes out
	// at once.
	Pipelines int
	// MaxBatch caps the commands of one pipeline; 0 means 512.
	MaxBatch int
	// PerKey sends every decision by its own script call, as before the
	// batch script (lua.Batch); false, the default, decides all the
	// single-key requests of one pipeline with one call of it, on nodes
	// that accept it (Redis 7.0 and later). For comparison and for a Redis
	// that must not run the batch script.
	PerKey bool
	// Observer, when set, is told of every round trip and failed command,
	// for metrics; nil means none.
	Observer Observer
	// Logger hears of what a node cannot do that sluice then works around
	// (a node without Redis Functions); nil means slog.Default().
	Logger *slog.Logger
	// Tracer, when set, gives each node's part of a traced batch a span
	// (trace.go), a child of the limiter's span in the caller's context;
	// nil, the default, is tracing off.
	Tracer trace.Tracer

	// goRedisPipes sends the per-node pipelines through go-redis (a Conn
	// per slot) instead of the lean connections of conn.go: the fallback,
	// for tests and measurements that compare the two. A Sentinel store
	// always does (go-redis follows the moving primary).
	goRedisPipes bool
}

// Store is a limit.Store on Redis. It is safe for concurrent use.
type Store struct {
	cc     *redis.ClusterClient // nil for a single node
	single *redis.Client
	cfg    Config

	mu       sync.Mutex
	breakers map[string]*breaker // by node address
	opts     *redis.Options      // of the nodes' own clients, in a cluster
	queues   sync.Map            // node address → *nodeQueue
	argCache sync.Map            // *limit.Policy → *policyArgs
	argCount atomic.Int64        // entries in argCache
	unacked  unackedCounts       // durable spends no replica acknowledged (durable.go)
	closing  chan struct{}
	closed   atomic.Bool
	swept    chan struct{} // a sweep is due (cap 1): the topology may have changed
	sweeper  sync.WaitGroup
	// lean: the pipelines go on lean connections (conn.go), whose open
	// ones are in leans (*leanConn → struct{}), for Close.
	lean  bool
	leans sync.Map
}

var _ limit.Store = (*Store)(nil)

// New builds a Store; it does not connect until the first request.
func New(cfg Config) (*Store, error) {
	cfg.setDefaults()
	s := &Store{cfg: cfg, breakers: map[string]*breaker{}, closing: make(chan struct{}), swept: make(chan struct{}, 1)}
	switch {
	case (len(cfg.SentinelAddrs) > 0 || cfg.MasterName != "") && (len(cfg.Addrs) > 0 || cfg.URL != ""):
		return nil, errors.New("cluster: set one of Addrs, URL and SentinelAddrs")
	case len(cfg.SentinelAddrs) > 0 || cfg.MasterName != "":
		c, err := newFailoverClient(cfg)
		if err != nil {
			return nil, err
		}
		s.single = c
	case len(cfg.Addrs) > 0 && cfg.URL != "":
		return nil, errors.New("cluster: set Addrs or URL, not both")
	case len(cfg.Addrs) > 0:
		s.connectCluster()
	case cfg.URL != "":
		o, err := nodeOptions(cfg)
		if err != nil {
			return nil, err
		}
		s.single = s.newClient(o)
	default:
		return nil, errors.New("cluster: no Redis address")
	}
	if s.cc != nil {
		s.sweeper.Add(1)
		go s.sweep()
	}
	switch {
	case cfg.goRedisPipes, len(cfg.SentinelAddrs) > 0:
	case s.cc != nil:
		s.lean = leanable(s.opts)
	default:
		s.lean = leanable(s.single.Options())
	}
	return s, nil
}

// setDefaults gives every zero field its default (see Config).
func (cfg *Config) setDefaults() {
	if cfg.Timeout <= 0 {
		cfg.Timeout = limit.DefaultTimeout
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = cfg.Timeout
	}
	if cfg.BreakerThreshold <= 0 {
		cfg.BreakerThreshold = 5
	}
	if cfg.BreakerCooldown <= 0 {
		cfg.BreakerCooldown = time.Second
	}
	if cfg.Pipelines <= 0 {
		cfg.Pipelines = 2
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 512
	}
	if cfg.PoolSize > 0 {
		cfg.PoolSize = max(cfg.PoolSize, cfg.Pipelines+1)
	}
}

// connectCluster makes the cluster client of Config.Addrs, and the options
// of the nodes' own clients.
func (s *Store) connectCluster() {
	cfg := &s.cfg
	s.cc = redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 cfg.Addrs,
		NewClient:             s.newClient,
		DialTimeout:           cfg.MaxTimeout,
		ReadTimeout:           cfg.MaxTimeout,
		WriteTimeout:          cfg.MaxTimeout,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1, // never replay: a timed-out script may have run
		PoolSize:              cfg.PoolSize,
		DisableIdentity:       true,
		// Every command sent through it names one key or one node. The
		// request/response routing policies would first fetch COMMAND
		// info under a context of go-redis's own (5s), which a stalled
		// node holds up, since MaxTimeout no longer cuts it short.
		DisableRoutingPolicies: true,
		// go-redis would send CLIENT MAINT_NOTIFICATIONS on every new
		// connection, an error reply in Redis's errorstats on a Redis
		// without it (7.x): no error replies of our own making.
		MaintNotificationsConfig: maintOff(),
		TLSConfig:                cfg.TLS,
		Username:                 cfg.Username,
		Password:                 cfg.Password,
	})
	s.opts = &redis.Options{
		DialTimeout: cfg.MaxTimeout, ReadTimeout: cfg.MaxTimeout, WriteTimeout: cfg.MaxTimeout,
		ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: cfg.PoolSize, DisableIdentity: true,
		TLSConfig: cfg.TLS, Username: cfg.Username, Password: cfg.Password,
		MaintNotificationsConfig: maintOff(), Protocol: nodeProtocol,
	}
}

// nodeProtocol is the RESP version of the connections that carry the
// pipelines: RESP2. The replies sluice reads — integers, arrays of them,
// error replies — are the same in both; over RESP3 go-redis looks for
// push notifications before and after every pipeline, with a
// recvfrom(MSG_PEEK) on a connection not put back in its pool in the last
// 5s, which a pipeline slot's own connection (link) never is.
const nodeProtocol = 2

// nodeOptions are the options of Config.URL's node: the URL's, with the
// deadlines, TLS, credentials and pool size of cfg over them.
func nodeOptions(cfg Config) (*redis.Options, error) {
	o, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = cfg.MaxTimeout, cfg.MaxTimeout, cfg.MaxTimeout
	o.ContextTimeoutEnabled = true
	o.MaxRetries = -1
	o.DisableIdentity = true
	o.MaintNotificationsConfig = maintOff()
	if o.Protocol == 0 { // not named by the URL
		o.Protocol = nodeProtocol
	}
	if cfg.TLS != nil {
		t := cfg.TLS.Clone()
		if h, _, err := net.SplitHostPort(o.Addr); err == nil && t.ServerName == "" {
			t.ServerName = h
		}
		if o.TLSConfig != nil && o.TLSConfig.InsecureSkipVerify {
			t.InsecureSkipVerify = true // rediss://…?skip_verify=true
		}
		o.TLSConfig = t
	}
	if cfg.Username != "" {
		o.Username = cfg.Username
	}
	if cfg.Password != "" {
		o.Password = cfg.Password
	}
	if cfg.PoolSize > 0 {
		o.PoolSize = cfg.PoolSize
	}
	return o, nil
}

// maintOff switches off go-redis's maintenance notifications.
func maintOff() *maintnotifications.Config {
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// newClient is redis.NewClient for every node client of the Store, go-redis's
// own included: a command sent without a deadline gets one of Timeout, so
// that a slot-map reload that meets a stalled node moves on to the next
// after Timeout, not after MaxTimeout. Its connections tell a late read
// from a silent node (watchReads, overload_read.go).
func (s *Store) newClient(o *redis.Options) *redis.Client {
	o.Dialer = s.watchReads(o)
	c := redis.NewClient(o)
	c.AddHook(defaultDeadline(s.cfg.Timeout))
	return c
}

// defaultDeadline is a go-redis hook that gives a command without a
// deadline one of its own.
type defaultDeadline time.Duration

func (defaultDeadline) DialHook(next redis.DialHook) redis.DialHook { return next }

func (defaultDeadline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (d defaultDeadline) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if _, ok := ctx.Deadline(); ok {
			return next(ctx, cmd)
		}
		ctx, cancel := context.WithTimeout(ctx, time.Duration(d))
		defer cancel()
		return next(ctx, cmd)
	}
}

// Close stops the node workers and closes every connection. Requests after
// Close fail with ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock() // no queue starts after this
	was := s.closed.Swap(true)
	s.mu.Unlock()
	if was {
		return nil
	}
	close(s.closing)
	s.sweeper.Wait()
	s.closeLeans()
	s.queues.Range(func(_, v any) bool {
		if c := v.(*nodeQueue).client; c != s.single {
			_ = c.Close()
		}
		return true
	})
	if s.cc != nil {
		return s.cc.Close()
	}
	return s.single.Close()
}

// Ping checks that every primary answers, for start-up and readiness, on
// the connections requests use (which it opens, so that the first requests
// find them ready).
func (s *Store) Ping(ctx context.Context) error {
	if s.cc != nil {
		return s.cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			q, err := s.queue(c.Options().Addr)
			if err != nil {
				return err
			}
			return q.client.Ping(ctx).Err()
		})
	}
	return s.single.Ping(ctx).Err()
}

// item is one request in flight: where it goes and how. A worker writes
// res, retry, eval, ask, addr and argv; Do reads them only after the
// item's unit is done, and only then may the item be pooled (doScratch).
type item struct {
	idx    int    // index in the batch
	key    string // Redis key
	cost   int64
	op     limit.Op
	from   int64 // an OpReturn's window, an OpClaim's hold (fromOf)
	args   []any // the whole EVALSHA command of a Multi call; nil for one key (see command)
	argv   [9]any
	script *lua.Script
	multi  []limit.Result // the per-key results of a Multi script call; nil for one key
	pa     *policyArgs    // the policy's arguments, for lua.Batch
	addr   string         // the node it goes to
	ask    bool           // send ASKING first
	eval   bool           // NOSCRIPT seen: send the whole script
	alone  bool           // the batch script could not decide it: use its own script
	again  bool           // send it once more in this pipeline's next pass
	retry  bool           // redirected: go round again
	// durable is the policy name of a spend under durability: replica
	// (durableOf), "" otherwise; by is its unit's deadline, set when it
	// is sent (WAIT's timeout, durable.go).
	durable string
	by      time.Time
	res     limit.Result
}

// command is the script call that decides it alone: EVALSHA, or EVAL when
// the node lacks the script. A single-key item's command is built here,
// in its argv, only when it is sent this way: the batch script needs
// none of it, and building it for every request was a third of a
// batch's allocations. Only the worker that sends it calls this.
func (it *item) command(eval bool) []any {
	if it.args != nil {
		if eval {
			return append([]any{"eval", it.script.Src}, it.args[2:]...)
		}
		return it.args
	}
	it.argv = [9]any{"evalsha", it.pa.sha, 1, it.key, it.pa.limit, it.pa.rate, it.pa.unit, it.cost, it.opArg()}
	if eval {
		it.argv[0], it.argv[1] = "eval", it.pa.src
	}
	return it.argv[:]
}

// Do decides a batch. Its items join the per-node queues, where concurrent
// batches from other connections are sent together, one pipeline per node.
func (s *Store) Do(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	sc := doPool.Get().(*doScratch)
	items := slices.Grow(sc.items[:0], len(reqs))[:len(reqs)]
	live := slices.Grow(sc.live[:0], len(reqs))
	receipts := false // some request takes with a receipt or gives back (adjust.go)
	for i := range reqs {
		r := &reqs[i]
		pa, err := s.policyArgs(r.Policy)
		if err != nil {
			out[i] = limit.Result{Err: err}
			continue
		}
		it := &items[i]
		it.idx, it.key, it.script, it.pa, it.cost, it.op, it.from = i, SpaceKey(r.Policy.Space, r.Key), pa.script, pa, r.Cost, r.Op, fromOf(r)
		it.durable = durableOf(r)
		if r.Op == limit.OpAdjust {
			it.cost, it.op, it.from = adjustArgs(r.Cost)
		}
		if r.Receipt != "" || r.Op == limit.OpAdjust && r.Cost < 0 {
			if err := receiptItem(it, r); err != nil {
				out[i] = limit.Result{Err: err}
				continue
			}
			receipts = true
		}
		if it.addr, err = s.route(ctx, it.key); err != nil {
			out[i] = limit.Result{Err: err}
			continue
		}
		live = append(live, it)
	}
	settled := s.rounds(ctx, live, out)
	if receipts {
		fileReceipts(reqs, out)
	}
	if !settled || cap(items) > maxPooledItems {
		return // a worker may still hold an item: leave them to the collector
	}
	clear(items)
	clear(live)
	sc.items, sc.live = items, live
	doPool.Put(sc)
}

// doScratch is the items of one Do, kept for the next once every worker is
// done with them (a pool of them: one slice of items was a Do's largest
// allocation in bytes). Items whose unit a waiter gave up on — its deadline
// came, or the Store closed, while the unit was queued or in flight — are
// still the worker's: that Do does not return its scratch, so a pooled item
// is never one a worker can still write.
type doScratch struct {
	items []item
	live  []*item
}

var doPool = sync.Pool{New: func() any { return new(doScratch) }}

// maxPooledItems bounds the items a pooled scratch keeps: a rare huge
// batch is left to the collector.
const maxPooledItems = 1024

// freeRounds are the rounds of a request sent at once: the first try, a
// redirection, and one more during a migration (ASK after MOVED).
const freeRounds = 3

// maxRounds bounds the rounds of a request whose context has no deadline.
const maxRounds = 16

// rounds sends items round after round until each is answered, following
// MOVED and ASK. A request still redirected after freeRounds is in a loop:
// during a slot move, the source may name the target as the owner before
// the target knows it, and the target names the source. It goes round
// again after a short pause, with the slot map reloaded, until its
// deadline; past it, it is unavailable (limit.ErrUnavailable), a
// connectivity condition for on_store_error, never an error reply. It
// reports whether every unit it sent was seen done: false means a worker
// may still hold some of the items.
func (s *Store) rounds(ctx context.Context, live []*item, out []limit.Result) (settled bool) {
	settled = true
	for r := 0; len(live) > 0; r++ {
		if r >= freeRounds && !s.pause(ctx, r-freeRounds) {
			for _, it := range live {
				out[it.idx] = limit.Result{Err: s.unavailable(it.addr, errRedirectLoop)}
			}
			return settled
		}
		var done bool
		live, done = s.round(ctx, live, out, r > 0)
		settled = settled && done
	}
	return settled
}

// pause waits before round n (from 0) of a redirection loop: 1ms, 2ms,
// 4ms, then 8ms each time, while the nodes settle. It reports false when
// the request should stop: its deadline came, or it has none and has gone
// round maxRounds times.
func (s *Store) pause(ctx context.Context, n int) bool {
	if _, ok := ctx.Deadline(); !ok && n+freeRounds >= maxRounds {
		return false
	}
	t := time.NewTimer(time.Millisecond << min(n, 3))
	defer t.Stop()
	select {
	case <-t.C:
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}

// opArg is the op argument of the scripts for each limit.Op.
var opArg = [4]any{"0", "1", "2", "3"}

// fromOf is what the scripts' op argument carries besides the op: an
// OpReturn's window, an OpClaim's hold.
func fromOf(r *limit.Request) int64 {
	if r.Op == limit.OpClaim {
		return r.Hold
	}
	return r.Window
}

// opArg is the item's op argument (lua.OpArg): boxed once for the common
// ops, built for a return that names its window.
func (it *item) opArg() any {
	if it.op == limit.OpReturn && it.from > 0 || it.op == limit.OpClaim && it.from != 0 {
		return lua.OpArg(int(it.op), it.from)
	}
	return opArg[it.op&3]
}

// policyArgs are the script arguments that depend only on the policy,
// boxed once per policy instead of once per request.
type policyArgs struct {
	script   *lua.Script
	sha, src any // script.SHA and script.Src
	id       any
	limit    any // lua.Args.Limit, Rate and Unit, boxed
	rate     any
	unit     any
	until    time.Time // lua.Args.Until: a calendar policy's arguments are computed again from then on
	owner    string    // limit.Policy.Owner, for the receipt scripts
	life     int64     // a bucket's receipt TTL in ms (limit.ReceiptLifeMs)
}

// maxArgCache bounds the policies whose arguments are kept. Policies from
// the config are few; CL.THROTTLE makes one per distinct set of arguments,
// so past the bound the cache starts again.
const maxArgCache = 4096

func (s *Store) policyArgs(p *limit.Policy) (*policyArgs, error) {
	return s.policyArgsAt(p, time.Now())
}

// policyArgsAt is policyArgs at now, sluice's clock: a calendar policy's
// cached arguments are computed again once now reaches their Until.
func (s *Store) policyArgsAt(p *limit.Policy, now time.Time) (*policyArgs, error) {
	if v, ok := s.argCache.Load(p); ok {
		if pa := v.(*policyArgs); pa.until.IsZero() || now.Before(pa.until) {
			return pa, nil
		}
	}
	a, err := lua.ArgsAt(p, now)
	if err != nil {
		return nil, err
	}
	pa := &policyArgs{script: a.Script, sha: a.Script.SHA, src: a.Script.Src, id: a.ID,
		limit: a.Limit, rate: a.Rate, unit: a.Unit, until: a.Until,
		owner: p.Owner(), life: limit.ReceiptLifeMs(p, 0, 0)}
	if s.argCount.Add(1) > maxArgCache {
		s.argCache.Clear()
		s.argCount.Store(1)
	}
	s.argCache.Store(p, pa)
	return pa, nil
}

// route returns the address of the primary that owns key's slot, by the
// cluster client's slot map. Loading that map is reaching the cluster, so
// its failures are connectivity failures, except on a closed Store.
func (s *Store) route(ctx context.Context, key string) (string, error) {
	if s.closed.Load() {
		return "", ErrClosed
	}
	if s.cc == nil {
		return s.single.Options().Addr, nil
	}
	node, err := s.cc.MasterForKey(ctx, key)
	if err != nil {
		return "", s.unavailable("", err)
	}
	return node.Options().Addr, nil
}

// round sends every item once through its node's queue, files the answers
// in out, and returns the items redirected elsewhere. A unit still queued
// or in flight when ctx ends is answered unavailable and left to its
// worker; when the Store closes, ErrClosed. settled is false when that
// happened to any unit.
func (s *Store) round(ctx context.Context, items []*item, out []limit.Result, redirected bool) (retry []*item, settled bool) {
	// The units' item lists are cut from one slice, sized by a first
	// count, instead of each growing on its own.
	units := make([]*unit, 0, 3)
	counts := make([]int, 0, 3)
	for _, it := range items {
		if i := unitFor(units, it.addr, it.durable != ""); i >= 0 {
			counts[i]++
			continue
		}
		units = append(units, &unit{addr: it.addr, ctx: ctx, done: make(chan struct{}), redirected: redirected, durable: it.durable != ""})
		counts = append(counts, 1)
	}
	all := make([]*item, len(items))
	for i, u := range units {
		u.items, all = all[:0:counts[i]], all[counts[i]:]
	}
	for _, it := range items {
		u := units[unitFor(units, it.addr, it.durable != "")]
		u.items = append(u.items, it)
	}
	var spans []trace.Span // nil: not traced
	if s.cfg.Tracer != nil {
		spans = s.startUnits(ctx, units)
	}
	for i, u := range units {
		// The last unit may be sent by this goroutine, when its node is
		// idle: the others are queued first, so that the nodes work at once.
		if err := s.submit(u, i == len(units)-1); err != nil {
			for _, it := range u.items {
				it.res = limit.Result{Err: err}
			}
			close(u.done)
		}
	}
	settled = true
	for i, u := range units {
		select {
		case <-u.done:
		case <-ctx.Done():
		case <-s.closing: // the workers are gone
		}
		select {
		case <-u.done: // perhaps answered as the deadline passed: keep the answer
		default:
			err := ErrClosed
			if ctx.Err() != nil {
				err = s.late(u, ctx.Err())
			}
			for _, it := range u.items {
				out[it.idx] = limit.Result{Err: err}
			}
			settled = false
			if spans != nil {
				endUnit(spans[i], nil, err)
			}
			continue
		}
		if spans != nil {
			endUnit(spans[i], u, nil)
		}
		for _, it := range u.items {
			if it.retry {
				it.retry = false
				retry = append(retry, it)
				continue
			}
			out[it.idx] = it.res
		}
	}
	return retry, settled
}

// unitFor is the index of the unit for addr and durable in units, or -1.
func unitFor(units []*unit, addr string, durable bool) int {
	for i, u := range units {
		if u.addr == addr && u.durable == durable {
			return i
		}
	}
	return -1
}

// file records the reply of one command of a pipeline, or marks the item
// for another round. It reports false for a connectivity failure.
func (s *Store) file(it *item, cmd *redis.IntSliceCmd, addr string) bool {
	err := cmd.Err()
	if err != nil {
		s.observeErr(addr, err)
	}
	ask := it.ask
	it.ask = false
	switch {
	case err == nil && it.multi != nil:
		it.res = decodeMulti(cmd.Val(), it.multi)
	case err == nil:
		it.res = decodeInts(cmd.Val())
	case redis.HasErrorPrefix(err, "NOSCRIPT"):
		// The EVAL that follows goes to the same node: after an ASK it
		// needs ASKING again, or an importing node answers MOVED.
		it.eval, it.ask = true, ask
	case s.redirect(it, err):
		it.retry = true
	case isConnectivity(err):
		it.res = limit.Result{Err: s.unavailable(addr, err)}
		return false
	default:
		it.res = limit.Result{Err: fmt.Errorf("redis %s: %w", addr, err)}
	}
	return true
}

// redirect points it at the node a MOVED or ASK error names. MOVED means
// the slot map is out of date: it is reloaded.
func (s *Store) redirect(it *item, err error) bool {
	if s.cc == nil {
		return false
	}
	addr, moved := redis.IsMovedError(err)
	if !moved {
		var ask bool
		if addr, ask = redis.IsAskError(err); !ask {
			return false
		}
		it.ask = true
	} else {
		s.topologyChanged()
		it.alone = false // the owner can decide it in its batch
	}
	it.addr = addr
	return true
}

// breakerLocked is the breaker of the node at addr, made on first use;
// s.mu is held. (A node's queue holds its breaker: tests ask for it by
// address, breaker in store_test.go.)
func (s *Store) breakerLocked(addr string) *breaker {
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
	s.topologyChanged()
	return &limit.UnavailableError{Node: addr, Err: err}
}

// Reset deletes the state of key under p (its Space names which).
func (s *Store) Reset(ctx context.Context, key string, p *limit.Policy) (bool, error) {
	if s.closed.Load() {
		return false, ErrClosed
	}
	var n int64
	var err error
	if s.cc != nil {
		n, err = s.cc.Del(ctx, spaceKeyOf(p, key)).Result()
	} else {
		n, err = s.single.Del(ctx, spaceKeyOf(p, key)).Result()
	}
	switch {
	case err != nil && isConnectivity(err):
		return false, s.unavailable("", err)
	case err != nil:
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

// decodeInts checks the script's reply shape: seven integers.
func decodeInts(n []int64) limit.Result {
	if len(n) != lua.ReplyInts {
		return limit.Result{Err: fmt.Errorf("cluster: unexpected script reply %v", n)}
	}
	return limit.Result{
		Allowed: n[0] == 1, Limit: n[1], Remaining: n[2],
		RetryAfterMs: n[3], ResetAfterMs: n[4], DecidedBy: limit.ByStore, Granted: n[5], Window: n[6],
	}
}

// decodeMulti checks the Multi script's reply shape, one integer and seven
// per key, and files the per-key results in out. The returned Result holds
// the overall verdict in Allowed, or Err.
func decodeMulti(n []int64, out []limit.Result) limit.Result {
	if len(n) != 1+7*len(out) {
		return limit.Result{Err: fmt.Errorf("cluster: unexpected multi-key script reply of %d integers for %d keys", len(n), len(out))}
	}
	for i := range out {
		out[i] = decodeInts(n[1+7*i : 8+7*i])
	}
	return limit.Result{Allowed: n[0] == 1}
}
