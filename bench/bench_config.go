package bench

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/policy"
)

// Scenario names a key pattern.
type Scenario string

// The scenarios.
const (
	// Uniform spreads requests over Config.Keyspace keys, so every primary
	// works.
	Uniform Scenario = "uniform"
	// Hot sends every request to one key, so one primary does all the work.
	Hot Scenario = "hot"
	// HotLease is Hot with a lease policy on the sluice side: sluice
	// sends RL.TAKE HotLeaseKey, whose policy (the first of Policy) has
	// hot mode lease, so once the key is hot each decision spends a token
	// leased in process; the direct side is the Hot direct run. Not in
	// DefaultScenarios.
	HotLease Scenario = "hot-lease"
)

// Defaults of Config, and of Config with Quick set.
const (
	DefaultClients        = 50
	DefaultKeyspace       = 1_000_000
	DefaultRounds         = 2
	DefaultRequests       = 200_000   // per run, at pipeline depth 1
	DefaultRequestsPiped  = 1_000_000 // per run, at pipeline depth > 1
	DefaultWarmup         = 20_000
	DefaultRunTimeout     = 10 * time.Minute
	QuickRequests         = 2_000
	QuickRounds           = 1
	QuickWarmup           = 500
	defaultStartupTimeout = 30 * time.Second
)

// DefaultPipelines are the pipeline depths of Config.Pipelines' zero value.
var DefaultPipelines = []int{1, 16}

// DefaultScenarios are the scenarios of Config.Scenarios' zero value.
var DefaultScenarios = []Scenario{Uniform, Hot}

// Policy is the policy file of the sluice that Run starts. Its catch-all
// policy "bench" is the one whose bucket parameters the direct EVALSHA runs
// pass; it admits essentially everything, so that both sides run the same
// script and it writes every time. Ahead of it, "bench-lease" matches only
// HotLeaseKey, with the same limit and rate and hot mode lease, for the
// hot-lease scenario, and "bench-hot" only HotKey, the same with hot mode
// off, so that the hot scenario measures the store path (uniform keys, under
// "bench", have the default hot block, which they never reach). The timeout is long so that a loaded store answers
// instead of the failure policy; Run checks that it did.
const Policy = `# written by sluice-lab bench: policies that admit essentially everything
timeout: 1s
policies:
  - name: bench-lease
    match: "{hot}:lease"
    limit: 1000000000
    rate: 1000000000
    period: 1s
    on_store_error: closed
    hot:
      mode: lease
      threshold: 1000
  - name: bench-hot
    match: "hot"
    limit: 1000000000
    rate: 1000000000
    period: 1s
    on_store_error: closed
    hot:
      mode: off
  - name: bench
    match: "*"
    limit: 1000000000
    rate: 1000000000
    period: 1s
    on_store_error: closed
`

// benchBucket is the bucket of Policy's "bench" policy, which both sides
// of a run decide with.
func benchBucket() (limit.Bucket, error) {
	set, err := policy.Parse([]byte(Policy), "bench.yaml")
	if err != nil {
		return limit.Bucket{}, fmt.Errorf("bench: the built-in policy: %w", err)
	}
	bucket, err := set.Lookup("bench").Bucket()
	if err != nil {
		return limit.Bucket{}, fmt.Errorf("bench: the built-in policy: %w", err)
	}
	return bucket, nil
}

// Config says what Run measures. The zero value measures the defaults
// below against a new local cluster and a new sluice child process.
type Config struct {
	// Cluster are seed nodes (host:port) of a running Redis Cluster. nil
	// starts a 3-primary, 3-replica cluster in a temporary folder and
	// stops it at the end.
	Cluster []string

	// SluiceAddr is host:port of a running sluice in front of Cluster. ""
	// starts Binary as `sluice serve` with Policy and stops it at the end.
	// A running sluice must admit every request of the benchmark, and for
	// the hot-lease scenario have Policy's bench-lease policy.
	SluiceAddr string

	// Binary is the sluice binary to start; "" means the one beside this
	// executable, else one built from the checkout, else sluice on PATH
	// (sluiceBinary).
	Binary string

	// NoEmbedded leaves out the embedded side. By default Run also starts
	// Binary as `sluice serve` with Policy and no store (embedded mode)
	// and measures it with the same commands as the sluice side, even in
	// front of a running SluiceAddr.
	NoEmbedded bool

	// RedisBenchmark is the redis-benchmark binary; "" means the one on
	// PATH. The cluster started for a nil Cluster needs redis-server and
	// redis-cli on PATH too.
	RedisBenchmark string

	// Clients is redis-benchmark's -c; 0 means 50.
	Clients int

	// Pipelines are the pipeline depths (-P) to sweep; nil means 1 and 16.
	Pipelines []int

	// Requests is redis-benchmark's -n for every run; 0 means 200,000 at
	// depth 1 and 1,000,000 at deeper pipelines (2,000 with Quick).
	Requests int

	// Keyspace is redis-benchmark's -r for the uniform scenario; 0 means
	// 1,000,000.
	Keyspace int

	// Rounds is how often each scenario × pipeline runs on each side, the
	// sides alternating; the report shows the median. 0 means 2 (1
	// with Quick).
	Rounds int

	// Threads is redis-benchmark's --threads for every run, every side
	// alike; 0 means 1. Left alone, redis-benchmark 7.0 runs one thread
	// per primary with --cluster and one otherwise; with more than one
	// thread it only notices the end of a run at its next 250ms tick, which
	// adds up to 250ms to the run's time and makes short runs look slow.
	Threads int

	// Scenarios to run; nil means uniform and hot (hot-lease only when
	// named).
	Scenarios []Scenario

	// Warmup is the requests sent to each side once, unrecorded, before
	// the first round; 0 means 20,000 (500 with Quick), -1 none.
	Warmup int

	// Quick makes a smoke run: the zero-valued Requests, Rounds and Warmup
	// take their small Quick defaults.
	Quick bool

	// RunTimeout bounds one redis-benchmark run; 0 means 10 minutes.
	RunTimeout time.Duration

	// MarkdownPath and SVGPath, when set, receive the report's table and
	// chart; missing folders are made.
	MarkdownPath string
	SVGPath      string

	// Now is the clock for the report's date; nil means time.Now.
	Now func() time.Time
}

// resolve returns cfg with every default applied, or an error naming
// every bad field.
func (cfg Config) resolve() (Config, error) {
	c := cfg
	c.defaults()
	if err := c.check(); err != nil {
		return Config{}, fmt.Errorf("bench: %w", err)
	}
	return c, nil
}

// defaults applies the defaults of the zero fields in place.
func (c *Config) defaults() {
	if c.Clients == 0 {
		c.Clients = DefaultClients
	}
	if len(c.Pipelines) == 0 {
		c.Pipelines = slices.Clone(DefaultPipelines)
	}
	if c.Keyspace == 0 {
		c.Keyspace = DefaultKeyspace
	}
	if c.Rounds == 0 {
		c.Rounds = DefaultRounds
		if c.Quick {
			c.Rounds = QuickRounds
		}
	}
	if c.Requests == 0 && c.Quick {
		c.Requests = QuickRequests
	}
	switch {
	case c.Warmup == 0 && c.Quick:
		c.Warmup = QuickWarmup
	case c.Warmup == 0:
		c.Warmup = DefaultWarmup
	case c.Warmup == -1:
		c.Warmup = 0
	}
	if len(c.Scenarios) == 0 {
		c.Scenarios = slices.Clone(DefaultScenarios)
	}
	if c.Threads == 0 {
		c.Threads = 1
	}
	if c.RunTimeout == 0 {
		c.RunTimeout = DefaultRunTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.RedisBenchmark == "" {
		c.RedisBenchmark = "redis-benchmark"
	}
}

// check names every bad field of a config whose defaults are applied.
func (c *Config) check() error {
	var errs []error
	if c.Clients < 1 {
		errs = append(errs, fmt.Errorf("clients must be at least 1, got %d", c.Clients))
	}
	for _, p := range c.Pipelines {
		if p < 1 {
			errs = append(errs, fmt.Errorf("pipeline depths must be at least 1, got %d", p))
		}
	}
	if c.Requests < 0 {
		errs = append(errs, fmt.Errorf("requests must not be negative, got %d", c.Requests))
	}
	if c.Keyspace < 1 {
		errs = append(errs, fmt.Errorf("keyspace must be at least 1, got %d", c.Keyspace))
	}
	if c.Rounds < 1 {
		errs = append(errs, fmt.Errorf("rounds must be at least 1, got %d", c.Rounds))
	}
	if c.Threads < 0 {
		errs = append(errs, fmt.Errorf("threads must not be negative, got %d", c.Threads))
	}
	if c.Warmup < 0 {
		errs = append(errs, fmt.Errorf("warmup must be -1, 0 or positive, got %d", c.Warmup))
	}
	for _, s := range c.Scenarios {
		if s != Uniform && s != Hot && s != HotLease {
			errs = append(errs, fmt.Errorf("scenario %q: want %s, %s or %s", s, Uniform, Hot, HotLease))
		}
	}
	if c.RunTimeout < 0 {
		errs = append(errs, fmt.Errorf("run timeout must not be negative, got %v", c.RunTimeout))
	}
	if c.SluiceAddr != "" && len(c.Cluster) == 0 {
		errs = append(errs, errors.New("a running sluice needs the cluster it uses: set Cluster too"))
	}
	return errors.Join(errs...)
}

// requests is -n for a run at pipeline depth p.
func (cfg *Config) requests(p int) int {
	switch {
	case cfg.Requests > 0:
		return cfg.Requests
	case p > 1:
		return DefaultRequestsPiped
	}
	return DefaultRequests
}
