package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
)

// Defaults of PartitionLabConfig.
const (
	DefaultPartitionLabPause       = 3 * time.Second
	DefaultPartitionLabMaxRequests = 1_000_000 // per policy
	DefaultPartitionLabInstances   = 2
	DefaultPartitionLabWorkers     = 4 // per instance and policy
	DefaultPartitionLabLocalShare  = 0.5
	DefaultPartitionLabTimeout     = 50 * time.Millisecond
)

// partitionNodeTimeout is the cluster-node-timeout of the partition lab's
// cluster: far longer than any pause, so that the paused primary is not
// failed over and the experiment stays a partition.
const partitionNodeTimeout = 60 * time.Second

// PartitionLabConfig says what `sluice-lab partition` measures. The zero value is the
// seed lab's experiment 2 on sluice: two sluice processes, the primary
// owning the tenant paused (SIGSTOP) for 3 s while 4 goroutines per process
// and policy send RL.TAKE, once for each on_store_error. It always starts
// its own cluster: it must signal a node.
type PartitionLabConfig struct {
	// Binary is the sluice binary; "" means sluiceBinary's.
	Binary string
	// Pause is how long the primary stays stopped, and the load runs; 0
	// means 3s. MaxRequests bounds the requests of each policy; 0 means
	// 1,000,000.
	Pause       time.Duration
	MaxRequests int64
	// Instances is the sluice processes; 0 means 2. Workers is the
	// goroutines per process and policy; 0 means 4.
	Instances int
	Workers   int
	// Limit and Rate (per second) are the bucket; 0 means 100 and 50.
	// LocalShare is local_share of the local policy; 0 means 0.5.
	Limit, Rate int64
	LocalShare  float64
	// Timeout is the store deadline of the policy file; 0 means 50ms.
	Timeout time.Duration
	// Now is the clock of the report's date; nil means time.Now.
	Now func() time.Time
}

func (c *PartitionLabConfig) resolve() error {
	c.Pause = cmp.Or(c.Pause, DefaultPartitionLabPause)
	c.MaxRequests = cmp.Or(c.MaxRequests, DefaultPartitionLabMaxRequests)
	c.Instances, c.Workers = cmp.Or(c.Instances, DefaultPartitionLabInstances), cmp.Or(c.Workers, DefaultPartitionLabWorkers)
	c.Limit, c.Rate = cmp.Or(c.Limit, DefaultLabLimit), cmp.Or(c.Rate, DefaultLabRate)
	c.LocalShare = cmp.Or(c.LocalShare, DefaultPartitionLabLocalShare)
	c.Timeout = cmp.Or(c.Timeout, DefaultPartitionLabTimeout)
	orNow(&c.Now)
	if c.Pause < 0 || c.MaxRequests < 0 || c.Instances < 0 || c.Workers < 0 || c.Limit < 0 || c.Rate < 0 || c.Timeout < 0 {
		return errors.New("lab partition: pause, max requests, instances, workers, limit, rate and timeout must not be negative")
	}
	if c.LocalShare < 0 || c.LocalShare > 1 {
		return fmt.Errorf("lab partition: local share %v: want 0 < share ≤ 1", c.LocalShare)
	}
	if c.Pause >= partitionNodeTimeout/2 {
		return fmt.Errorf("lab partition: pause %v: want under %v, or the primary is failed over", c.Pause, partitionNodeTimeout/2)
	}
	return nil
}

// rig: the lab always starts its own cluster, as it must signal a node.
func (c *PartitionLabConfig) rig() rigSpec {
	return rigSpec{name: "lab partition", binary: c.Binary, nodeTimeout: partitionNodeTimeout, policy: c.policyYAML(),
		now: c.Now, tool: "go-redis, one request in flight per goroutine"}
}

// config is the report's config, for RunLab.
func (rep *PartitionLabReport) config() labConfig { return &rep.Config }

// partitionModes are the rows, in order.
var partitionModes = []string{"open", "closed", "local"}

func (cfg PartitionLabConfig) policyYAML() string {
	var ps []labPolicy
	for _, m := range partitionModes {
		p := labPolicy{name: m, match: m + ":*", limit: cfg.Limit, rate: cfg.Rate, onError: m}
		if m == "local" {
			p.localShare = cfg.LocalShare
		}
		ps = append(ps, p)
	}
	return policyFile("written by sluice-lab partition", cfg.Timeout, ps...)
}

// shareBudget is what the local fallback buckets of every instance admit
// together in elapsed, each starting full at its share: instances ×
// (⌊limit × share⌋ + ⌊rate × share⌋ × elapsed).
func (cfg PartitionLabConfig) shareBudget(elapsed time.Duration) float64 {
	l := max(1, math.Floor(float64(cfg.Limit)*cfg.LocalShare))
	r := max(1, math.Floor(float64(cfg.Rate)*cfg.LocalShare))
	return float64(cfg.Instances) * (l + r*elapsed.Seconds())
}

// PartitionLabRow is one on_store_error during the pause.
type PartitionLabRow struct {
	Mode                      string // open, closed or local
	Key                       string
	Allowed, Rejected, Errors int64
	FirstError                string
	DecidedBy                 map[string]int64
	Slowest                   time.Duration
	Elapsed                   time.Duration
	// Cap is what one shared bucket admits in Elapsed (limit + rate ×
	// Elapsed); Share is what the local fallback buckets of all
	// instances admit together.
	Cap, Share float64
	// Strict is the time from SIGCONT to the first reply decided by the
	// store again.
	Strict time.Duration
}

// Verdict reads the row's numbers.
func (r PartitionLabRow) Verdict() string {
	switch {
	case r.Errors > 0:
		return fmt.Sprintf("%d error replies: the policy did not answer", r.Errors)
	case r.Allowed+r.Rejected == 0:
		return "no replies"
	case r.Allowed == 0:
		return "cap kept, tenant down"
	case r.Rejected == 0 && float64(r.Allowed) > r.Cap:
		return fmt.Sprintf("availability kept, cap lost (%.1f× the cap)", float64(r.Allowed)/r.Cap)
	case r.Rejected == 0:
		return "availability kept (the load stayed under the cap)"
	case float64(r.Allowed) <= r.Share*1.01+1 && float64(r.Allowed) <= r.Cap*1.01+1:
		return "degraded: each process admits its share, cap kept"
	case float64(r.Allowed) <= r.Share*1.01+1:
		return fmt.Sprintf("degraded: each process admits its share, %.2f× the cap", float64(r.Allowed)/r.Cap)
	}
	return fmt.Sprintf("over its share: %.2f× the cap", float64(r.Allowed)/r.Cap)
}

// PartitionLabReport is `sluice-lab partition`: the experiment (run) and what it measured.
type PartitionLabReport struct {
	Config PartitionLabConfig
	Owner  string // the paused primary
	Paused time.Duration
	Rows   []PartitionLabRow
	Pids   []int
	LabRun
}

// run is the seed lab's experiment 2, on a cluster that does not fail over
// within the pause: it starts Config.Instances sluice processes, checks
// that three keys (one per on_store_error, one hash tag, so one owner) are
// decided by the store, stops the owner with SIGSTOP, drives the three
// keys at once through every instance for Config.Pause, resumes the owner
// with SIGCONT and waits until each key is decided by the store again.
func (rep *PartitionLabReport) run(ctx context.Context, rig *rig) error {
	c := rep.Config
	clients, err := rig.startSluice(ctx, c.Instances, rig.seeds, rig.policy, c.Workers*len(partitionModes))
	if err != nil {
		return err
	}
	rep.Pids = rig.pids()
	keys, owner, err := rep.owner(ctx, rig, clients)
	if err != nil {
		return err
	}
	loads, back, err := rep.pausedLoad(ctx, rig, owner, clients, keys)
	if err != nil {
		return err
	}
	for i, m := range partitionModes {
		ld := loads[i]
		row := PartitionLabRow{Mode: m, Key: keys[i], Allowed: ld.admitted, Rejected: ld.rejected, Errors: ld.errors,
			DecidedBy: ld.by, Slowest: maxDuration(ld.lat), FirstError: ld.firstError(), Elapsed: ld.elapsed()}
		row.Cap = labBudget(c.Limit, c.Rate, row.Elapsed)
		row.Share = c.shareBudget(row.Elapsed)
		// The local fallback answers with its share's limit.
		if ld.wrongLimit > 0 && m != "local" {
			return rig.errorf("%s: %d replies carry a limit other than %d", keys[i], ld.wrongLimit, c.Limit)
		}
		rep.Rows = append(rep.Rows, row)
	}
	for i := range rep.Rows {
		at, err := waitStore(ctx, clients[0], keys[i], 15*time.Second)
		if err != nil {
			return rig.errorf("after SIGCONT: %w", err)
		}
		rep.Rows[i].Strict = at.Sub(back)
	}
	for _, row := range rep.Rows {
		rig.logf("on_store_error %s: allowed %d rejected %d errors %d slowest %v decided_by %s strict %v after SIGCONT: %s",
			row.Mode, row.Allowed, row.Rejected, row.Errors, row.Slowest.Round(time.Millisecond), formatCounts(row.DecidedBy),
			row.Strict.Round(time.Millisecond), row.Verdict())
	}
	return ctx.Err()
}

// owner checks that the three keys, one per mode, are decided by the
// store through every client and live on one primary, which it returns.
func (rep *PartitionLabReport) owner(ctx context.Context, rig *rig, clients []*redis.Client) ([]string, *localredis.Node, error) {
	keys := make([]string, len(partitionModes))
	for i, m := range partitionModes {
		keys[i] = m + ":{acme}"
		for _, cl := range clients {
			if err := mustStore(ctx, cl, keys[i]); err != nil {
				return nil, nil, rig.errorf("%w", err)
			}
		}
	}
	owner, err := rig.rc.PrimaryForKey(ctx, cluster.Key(keys[0]))
	if err != nil {
		return nil, nil, err
	}
	for _, k := range keys[1:] {
		if o, err := rig.rc.PrimaryForKey(ctx, cluster.Key(k)); err != nil || o != owner {
			return nil, nil, rig.errorf("%s is not on %s with %s (%v)", k, owner.Addr, keys[0], err)
		}
	}
	rep.Owner = owner.Addr
	return keys, owner, nil
}

// pausedLoad stops owner with SIGSTOP, drives every key at once through
// every client for Config.Pause and resumes it with SIGCONT; back is when.
func (rep *PartitionLabReport) pausedLoad(ctx context.Context, rig *rig, owner *localredis.Node, clients []*redis.Client, keys []string) (loads []loadResult, back time.Time, err error) {
	c := rep.Config
	rig.logf("SIGSTOP %s (pid %d), the owner of %s, for %v", owner.Addr, owner.Pid, strings.Join(keys, ", "), c.Pause)
	if err := owner.Pause(); err != nil {
		return nil, back, err
	}
	paused := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			_ = owner.Resume()
		}
	}()
	loads = make([]loadResult, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() {
			loads[i] = drive(ctx, clients, loadSpec{
				key: k, workers: c.Workers, pipeline: 1,
				duration: c.Pause, maxRequests: c.MaxRequests, limit: c.Limit,
			})
		})
	}
	wg.Wait()
	if err := owner.Resume(); err != nil {
		return nil, back, err
	}
	resumed = true
	back = time.Now()
	rep.Paused = back.Sub(paused)
	rig.logf("SIGCONT %s after %v", owner.Addr, rep.Paused.Round(time.Millisecond))
	return loads, back, nil
}

// Markdown renders the seed lab's partition rows with the measured numbers.
func (r *PartitionLabReport) Markdown() string { return render("partition", r) }

// NodeTimeout is the cluster-node-timeout of the lab's cluster.
func (r *PartitionLabReport) NodeTimeout() time.Duration { return partitionNodeTimeout }

// ShareOf is the local fallback's bound of the row of mode: what the local
// buckets of every instance admit together; NaN without such a row.
func (r *PartitionLabReport) ShareOf(mode string) float64 {
	for _, row := range r.Rows {
		if row.Mode == mode {
			return row.Share
		}
	}
	return math.NaN()
}
