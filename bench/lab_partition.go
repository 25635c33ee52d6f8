package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/cluster"
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

// PartitionLabConfig says what PartitionLab measures. The zero value is the
// seed lab's experiment 2 on sluice: two sluice processes, the primary
// owning the tenant paused (SIGSTOP) for 3 s while 4 goroutines per process
// and policy send RL.TAKE, once for each on_store_error. It always starts
// its own cluster: it must signal a node.
type PartitionLabConfig struct {
	// Binary is the sluice binary; "" means this executable.
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

func (cfg PartitionLabConfig) resolve() (PartitionLabConfig, error) {
	c := cfg
	if c.Pause == 0 {
		c.Pause = DefaultPartitionLabPause
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = DefaultPartitionLabMaxRequests
	}
	if c.Instances == 0 {
		c.Instances = DefaultPartitionLabInstances
	}
	if c.Workers == 0 {
		c.Workers = DefaultPartitionLabWorkers
	}
	if c.Limit == 0 {
		c.Limit = DefaultLabLimit
	}
	if c.Rate == 0 {
		c.Rate = DefaultLabRate
	}
	if c.LocalShare == 0 {
		c.LocalShare = DefaultPartitionLabLocalShare
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultPartitionLabTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Pause < 0 || c.MaxRequests < 0 || c.Instances < 0 || c.Workers < 0 || c.Limit < 0 || c.Rate < 0 || c.Timeout < 0 {
		return c, errors.New("lab partition: pause, max requests, instances, workers, limit, rate and timeout must not be negative")
	}
	if c.LocalShare < 0 || c.LocalShare > 1 {
		return c, fmt.Errorf("lab partition: local share %v: want 0 < share ≤ 1", c.LocalShare)
	}
	if c.Pause >= partitionNodeTimeout/2 {
		return c, fmt.Errorf("lab partition: pause %v: want under %v, or the primary is failed over", c.Pause, partitionNodeTimeout/2)
	}
	return c, nil
}

// partitionModes are the rows, in order.
var partitionModes = []string{"open", "closed", "local"}

func (cfg PartitionLabConfig) policyYAML() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# written by sluice lab partition\ntimeout: %s\npolicies:\n", cfg.Timeout)
	for _, m := range partitionModes {
		fmt.Fprintf(&b, "  - name: %s\n    match: \"%s:*\"\n    limit: %d\n    rate: %d\n    period: 1s\n    on_store_error: %s\n",
			m, m, cfg.Limit, cfg.Rate, m)
		if m == "local" {
			fmt.Fprintf(&b, "    local_share: %g\n", cfg.LocalShare)
		}
	}
	return b.String()
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

// PartitionLabReport is what PartitionLab measured.
type PartitionLabReport struct {
	Config  PartitionLabConfig
	Machine Machine
	Owner   string // the paused primary
	Paused  time.Duration
	Rows    []PartitionLabRow
	Pids    []int
	Elapsed time.Duration
}

// PartitionLab runs the seed lab's experiment 2: it starts a cluster that
// does not fail over within the pause, cfg.Instances sluice processes in
// front of it, checks that three keys (one per on_store_error, one hash
// tag, so one owner) are decided by the store, stops the owner with
// SIGSTOP, drives the three keys at once through every instance for
// cfg.Pause, resumes the owner with SIGCONT and waits until each key is
// decided by the store again.
func PartitionLab(ctx context.Context, cfg PartitionLabConfig, progress io.Writer) (*PartitionLabReport, error) {
	began := time.Now()
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	rig, err := newLabRig(ctx, "partition", c.Binary, nil, partitionNodeTimeout, progress)
	if err != nil {
		return nil, err
	}
	defer rig.close()
	path, err := rig.writePolicy("partition.yaml", c.policyYAML())
	if err != nil {
		return nil, err
	}
	clients, err := rig.startSluice(ctx, c.Instances, rig.seeds, path, c.Workers*len(partitionModes))
	if err != nil {
		return nil, err
	}
	rep := &PartitionLabReport{Config: c, Machine: machine(c.Now(), sluiceVersion(ctx, clients[0]), redisVersion(ctx, rig.seeds), "go-redis, one request in flight per goroutine")}
	for _, ch := range rig.children {
		rep.Pids = append(rep.Pids, ch.pid())
	}
	keys := make([]string, len(partitionModes))
	for i, m := range partitionModes {
		keys[i] = m + ":{acme}"
		for _, cl := range clients {
			if err := mustStore(ctx, cl, keys[i]); err != nil {
				return rep, fmt.Errorf("lab partition: %w", err)
			}
		}
	}
	owner, err := rig.rc.PrimaryForKey(ctx, cluster.Key(keys[0]))
	if err != nil {
		return rep, err
	}
	for _, k := range keys[1:] {
		if o, err := rig.rc.PrimaryForKey(ctx, cluster.Key(k)); err != nil || o != owner {
			return rep, fmt.Errorf("lab partition: %s is not on %s with %s (%v)", k, owner.Addr, keys[0], err)
		}
	}
	rep.Owner = owner.Addr

	rig.logf("SIGSTOP %s (pid %d), the owner of %s, for %v", owner.Addr, owner.Pid, strings.Join(keys, ", "), c.Pause)
	if err := owner.Pause(); err != nil {
		return rep, err
	}
	paused := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			_ = owner.Resume()
		}
	}()
	loads := make([]loadResult, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() {
			loads[i] = driveHot(ctx, clients, loadSpec{
				key: k, workers: c.Workers, pipeline: 1,
				duration: c.Pause, maxRequests: c.MaxRequests, limit: c.Limit,
			})
		})
	}
	wg.Wait()
	if err := owner.Resume(); err != nil {
		return rep, err
	}
	resumed = true
	back := time.Now()
	rep.Paused = back.Sub(paused)
	rig.logf("SIGCONT %s after %v", owner.Addr, rep.Paused.Round(time.Millisecond))

	for i, m := range partitionModes {
		ld := loads[i]
		row := PartitionLabRow{Mode: m, Key: keys[i], Allowed: ld.admitted, Rejected: ld.rejected, Errors: ld.errors,
			DecidedBy: ld.by, Slowest: maxDuration(ld.lat)}
		if ld.firstErr != nil {
			row.FirstError = ld.firstErr.Error()
		}
		if !ld.first.IsZero() {
			row.Elapsed = ld.last.Sub(ld.first)
		}
		row.Cap = labBudget(c.Limit, c.Rate, row.Elapsed)
		row.Share = c.shareBudget(row.Elapsed)
		// The local fallback answers with its share's limit.
		if ld.wrongLimit > 0 && m != "local" {
			return rep, fmt.Errorf("lab partition: %s: %d replies carry a limit other than %d", keys[i], ld.wrongLimit, c.Limit)
		}
		rep.Rows = append(rep.Rows, row)
	}
	for i := range rep.Rows {
		at, err := waitStore(ctx, clients[0], keys[i], 15*time.Second)
		if err != nil {
			return rep, fmt.Errorf("lab partition: after SIGCONT: %w", err)
		}
		rep.Rows[i].Strict = at.Sub(back)
	}
	for _, row := range rep.Rows {
		rig.logf("on_store_error %s: allowed %d rejected %d errors %d slowest %v decided_by %s strict %v after SIGCONT: %s",
			row.Mode, row.Allowed, row.Rejected, row.Errors, row.Slowest.Round(time.Millisecond), formatCounts(row.DecidedBy),
			row.Strict.Round(time.Millisecond), row.Verdict())
	}
	rep.Elapsed = time.Since(began)
	return rep, ctx.Err()
}

// Markdown renders the seed lab's partition rows with the measured numbers.
func (r *PartitionLabReport) Markdown() string {
	c := r.Config
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# sluice lab partition: the owning primary frozen mid-flight\n\n")
	w("Machine: %s.\n\n", r.Machine)
	w("%d sluice processes (pids %v) in front of a 3+3 Redis Cluster with cluster-node-timeout %v, so nothing fails over. "+
		"Three keys with one hash tag, so one owner (%s), one per `on_store_error`; each policy: capacity %d, refill %d/s, store timeout %s. "+
		"The owner is stopped with SIGSTOP (the seed lab's `docker pause`: the socket stays open, no reply comes) "+
		"while %d goroutines per process and key send one `RL.TAKE` at a time; SIGCONT %s later. The whole run took %s.\n\n",
		c.Instances, r.Pids, partitionNodeTimeout, r.Owner, c.Limit, c.Rate, c.Timeout, c.Workers, r.Paused.Round(time.Millisecond),
		r.Elapsed.Round(time.Second))
	w("| Setup | allowed | rejected | error replies | slowest reply | decided_by | cap (%d + %d × elapsed) | strict again after SIGCONT | verdict |\n", c.Limit, c.Rate)
	w("|---|--:|--:|--:|--:|---|--:|--:|---|\n")
	for _, row := range r.Rows {
		setup := fmt.Sprintf("%d processes, primary paused, on_store_error %s", c.Instances, row.Mode)
		if row.Mode == "local" {
			setup += fmt.Sprintf(" (local_share %g)", c.LocalShare)
		}
		w("| %s | %s | %s | %s | %s ms | %s | %s | %s ms | %s |\n", setup, thousands(float64(row.Allowed)), thousands(float64(row.Rejected)),
			thousands(float64(row.Errors)), ms(float64(row.Slowest)/1e6), formatCounts(row.DecidedBy), thousands(row.Cap),
			ms(float64(row.Strict)/1e6), row.Verdict())
	}
	w("\n")
	w("- **cap** is what the one shared bucket would admit from full over the load's elapsed time; the local row's bound is each process's share: "+
		"%d × (⌊%d × %g⌋ + ⌊%d × %g⌋ × elapsed) = %s here.\n", c.Instances, c.Limit, c.LocalShare, c.Rate, c.LocalShare, thousands(r.shareOf("local")))
	w("- **slowest reply** is the longest RL.TAKE round trip seen by a client: the store timeout bounds it, and once a node's circuit breaker opens the policy answers without waiting.\n")
	w("- **strict again** is from SIGCONT to the first reply of the key decided by `store`.\n")
	w("- The verdict is computed from the numbers: 0 allowed is \"cap kept, tenant down\"; 0 rejected and more than the cap is \"availability kept, cap lost\"; " +
		"allowed within the local shares is \"degraded\".\n\n")
	for _, row := range r.Rows {
		if row.FirstError != "" {
			w("First error reply of %s: `%s`\n\n", row.Key, row.FirstError)
		}
	}
	w("The policy file:\n\n```yaml\n%s```\n", c.policyYAML())
	return b.String()
}

func (r *PartitionLabReport) shareOf(mode string) float64 {
	for _, row := range r.Rows {
		if row.Mode == mode {
			return row.Share
		}
	}
	return math.NaN()
}
