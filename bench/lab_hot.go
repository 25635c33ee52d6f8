package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/policy"
)

// HotLabMode is one arm of the hot-tenant experiment: the hot-key mode of
// the policy, named as the report names it.
type HotLabMode string

// The arms.
const (
	// LabStrict is hot mode off: every request runs the script on the
	// shard that owns the key.
	LabStrict HotLabMode = "strict"
	// LabSplit is hot mode split: a hot key's bucket is K sub-buckets on
	// different slots.
	LabSplit HotLabMode = "split"
	// LabLease is hot mode lease: each instance claims tokens in batches
	// and spends them in process.
	LabLease HotLabMode = "lease"
)

// Hot is the policy's hot mode of the arm.
func (m HotLabMode) Hot() limit.HotMode {
	switch m {
	case LabSplit:
		return limit.HotSplit
	case LabLease:
		return limit.HotLease
	}
	return limit.HotOff
}

// DecidedBy is the decided_by of a reply that the arm's own path decided:
// store, split or lease.
func (m HotLabMode) DecidedBy() string {
	switch m {
	case LabSplit:
		return limit.BySplit
	case LabLease:
		return limit.ByLease
	}
	return limit.ByStore
}

// HotLabKey is the one key of the hot-tenant experiment.
const HotLabKey = "hot:tenant"

// Defaults of HotLabConfig.
const (
	DefaultHotLabDuration    = 5 * time.Second
	DefaultHotLabMaxRequests = 20_000_000 // per arm
	DefaultHotLabInstances   = 2
	DefaultHotLabWorkers     = 25 // per instance
	DefaultHotLabPipeline    = 16
	DefaultHotLabLimit       = 1000
	DefaultHotLabRate        = 500
	DefaultHotLabPeriod      = time.Second
	DefaultHotLabThreshold   = 1000
	DefaultHotLabSplit       = 8
	DefaultHotLabTimeout     = time.Second
)

// DefaultHotLabModes are the arms of HotLabConfig.Modes' zero value.
var DefaultHotLabModes = []HotLabMode{LabStrict, LabSplit, LabLease}

// HotLabConfig says what `sluice-lab hot` measures. The zero value is the
// experiment of the hot-tenant issue against a new local cluster: two
// sluice instances, 25 goroutines each sending pipelines of 16 RL.TAKE of
// one key for 5 s, once per arm.
type HotLabConfig struct {
	// Cluster are seed nodes (host:port) of a running Redis Cluster. nil
	// starts a 3-primary, 3-replica cluster in a temporary folder and
	// stops it at the end.
	Cluster []string

	// Binary is the sluice binary started for each instance; "" means
	// sluiceBinary's: the one beside sluice-lab, else one built from the
	// checkout, else sluice on PATH.
	Binary string

	// Modes are the arms, run in this order; nil means strict, split,
	// lease.
	Modes []HotLabMode

	// Duration is the load of each arm; 0 means 5s. MaxRequests bounds
	// the requests of each arm too; 0 means 20,000,000.
	Duration    time.Duration
	MaxRequests int64

	// Instances is the number of sluice processes, all in front of the
	// one cluster; 0 means 2. Workers is the goroutines per instance, each
	// sending one pipeline at a time; 0 means 25. Pipeline is the RL.TAKE
	// commands per pipeline; 0 means 16.
	Instances int
	Workers   int
	Pipeline  int

	// The policy, the same in every arm except its hot mode: Limit tokens
	// (0 means 1000), Rate per Period (0 means 500 per 1s), hot Threshold
	// in requests/s on one instance (0 means 1000), Split sub-buckets (0
	// means 8). on_store_error is closed.
	Limit     int64
	Rate      int64
	Period    time.Duration
	Threshold int64
	Split     int

	// Timeout is the policy file's store deadline; 0 means 1s, long
	// enough that a loaded store answers instead of the failure policy
	// (the decided_by counts show any fallback).
	Timeout time.Duration

	// Now is the clock for the report's date; nil means time.Now.
	Now func() time.Time
}

// resolve returns cfg with every default applied, or an error naming the
// first bad field.
func (c *HotLabConfig) resolve() error {
	if len(c.Modes) == 0 {
		c.Modes = slices.Clone(DefaultHotLabModes)
	}
	c.Duration, c.MaxRequests = cmp.Or(c.Duration, DefaultHotLabDuration), cmp.Or(c.MaxRequests, DefaultHotLabMaxRequests)
	c.Instances, c.Workers = cmp.Or(c.Instances, DefaultHotLabInstances), cmp.Or(c.Workers, DefaultHotLabWorkers)
	c.Pipeline = cmp.Or(c.Pipeline, DefaultHotLabPipeline)
	c.Limit, c.Rate, c.Period = cmp.Or(c.Limit, DefaultHotLabLimit), cmp.Or(c.Rate, DefaultHotLabRate), cmp.Or(c.Period, DefaultHotLabPeriod)
	c.Threshold, c.Split = cmp.Or(c.Threshold, DefaultHotLabThreshold), cmp.Or(c.Split, DefaultHotLabSplit)
	c.Timeout = cmp.Or(c.Timeout, DefaultHotLabTimeout)
	orNow(&c.Now)
	var errs []error
	for _, m := range c.Modes {
		if m != LabStrict && m != LabSplit && m != LabLease {
			errs = append(errs, fmt.Errorf("mode %q: want %s, %s or %s", m, LabStrict, LabSplit, LabLease))
		}
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"duration", int64(c.Duration)}, {"max requests", c.MaxRequests}, {"instances", int64(c.Instances)},
		{"workers", int64(c.Workers)}, {"pipeline", int64(c.Pipeline)}, {"limit", c.Limit}, {"rate", c.Rate},
		{"period", int64(c.Period)}, {"threshold", c.Threshold}, {"split", int64(c.Split)}, {"timeout", int64(c.Timeout)},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %d", f.name, f.v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab hot: %w", err)
	}
	for _, m := range c.Modes {
		if _, err := policy.Parse([]byte(c.PolicyYAML(m)), "hotlab-"+string(m)+".yaml"); err != nil {
			return fmt.Errorf("lab hot: the %s policy: %w", m, err)
		}
	}
	return nil
}

// rig: each arm writes its own policy file.
func (c *HotLabConfig) rig() rigSpec {
	return rigSpec{name: "lab hot", binary: c.Binary, cluster: c.Cluster, now: c.Now, tool: "go-redis " + redis.Version() + " pipelines"}
}

// config is the report's config, for RunLab.
func (rep *HotLabReport) config() labConfig { return &rep.Config }

// PolicyYAML is the policy file of one arm.
func (cfg HotLabConfig) PolicyYAML(m HotLabMode) string {
	return policyFile("written by sluice-lab hot: the "+string(m)+" arm", cfg.Timeout, labPolicy{
		name: "tenant", match: "*", limit: cfg.Limit, rate: cfg.Rate, period: cfg.Period, onError: "closed",
		hot: string(m.Hot()), threshold: cfg.Threshold, split: cfg.Split,
	})
}

// Budget is the most a bucket of the config's policy can admit in elapsed
// when it starts full: limit + rate × elapsed.
func (cfg HotLabConfig) Budget(elapsed time.Duration) float64 {
	return float64(cfg.Limit) + float64(cfg.Rate)*elapsed.Seconds()/cfg.Period.Seconds()
}

// refill is the time an empty bucket of the policy needs to be full.
func (cfg HotLabConfig) refill() time.Duration {
	return time.Duration(float64(cfg.Period) * float64(cfg.Limit) / float64(cfg.Rate))
}

// run is the hot-tenant experiment: for each arm it starts
// Config.Instances sluice processes with the arm's policy in front of one
// cluster, waits until the key's bucket is full, drives the one key
// through all of them at once at the machine's top rate, counts every
// reply and stops the processes. Error replies are counted, not fatal; the
// run fails when a process or the cluster fails, or when the replies show
// a policy other than the arm's.
func (rep *HotLabReport) run(ctx context.Context, rig *rig) error {
	c := rep.Config
	set, err := policy.Parse([]byte(c.PolicyYAML(LabStrict)), "hotlab.yaml")
	if err != nil {
		return rig.errorf("the policy: %w", err)
	}
	bucket, err := set.Match(HotLabKey).Bucket()
	if err != nil {
		return rig.errorf("the policy: %w", err)
	}
	l := &hotLab{cfg: c, rig: rig}
	if l.store, err = openStore(ctx, rig.seeds, bucket); err != nil {
		return err
	}
	defer l.store.close()
	rep.Key, rep.Primaries = HotLabKey, l.store.primaries
	if rep.Owner, err = l.store.owner(ctx, redisKey(HotLabKey)); err != nil {
		return err
	}
	rig.logf("%s is %s on %s; %d primaries; %d instances × %d goroutines × pipelines of %d, %v per arm",
		HotLabKey, redisKey(HotLabKey), rep.Owner, len(l.store.primaries), c.Instances, c.Workers, c.Pipeline, c.Duration)
	var lastEnd time.Time
	for i, m := range c.Modes {
		res, err := l.arm(ctx, m, fmt.Sprintf("[%d/%d] %s", i+1, len(c.Modes), m), lastEnd)
		rep.Arms = append(rep.Arms, res)
		if err != nil {
			return err
		}
		lastEnd = res.end
	}
	return nil
}

// hotLab holds what the arms share.
type hotLab struct {
	cfg   HotLabConfig
	rig   *rig
	store *store
}

// arm runs one mode: the sluice processes, a full bucket, the load. A
// previous arm's last reply at lastEnd (zero for none) left the key's
// buckets, sub-buckets included, empty; they are full again one refill
// time later.
func (l *hotLab) arm(ctx context.Context, m HotLabMode, title string, lastEnd time.Time) (HotLabResult, error) {
	res := HotLabResult{Mode: m}
	path, err := l.rig.writePolicy("hotlab-"+string(m)+".yaml", l.cfg.PolicyYAML(m))
	if err != nil {
		return res, err
	}
	defer l.rig.stopSluice()
	clients, err := l.rig.startSluice(ctx, l.cfg.Instances, l.rig.seeds, path, l.cfg.Workers)
	if err != nil {
		return res, err
	}
	res.Pids = l.rig.pids()
	if !lastEnd.IsZero() {
		if wait := time.Until(lastEnd.Add(l.cfg.refill() + 100*time.Millisecond)); wait > 0 {
			l.rig.logf("%s: waiting %v for the buckets to refill", m, wait.Round(time.Millisecond))
			if err := sleep(ctx, wait); err != nil {
				return res, err
			}
		}
	}
	if err := l.waitFull(ctx, clients[0]); err != nil {
		return res, err
	}

	before, err := l.store.stats(ctx)
	if err != nil {
		return res, err
	}
	ld := drive(ctx, clients, loadSpec{
		key: HotLabKey, workers: l.cfg.Workers, pipeline: l.cfg.Pipeline,
		duration: l.cfg.Duration, maxRequests: l.cfg.MaxRequests, limit: l.cfg.Limit,
	})
	after, err := l.store.stats(ctx)
	if err != nil {
		return res, err
	}
	for _, addr := range l.store.primaries {
		res.ScriptCalls = append(res.ScriptCalls, after[addr].scriptCalls-before[addr].scriptCalls)
	}
	res.fill(ld, l.cfg)
	l.rig.logf("%s: %.0f req/s  p99 %.3f ms  admitted %d of budget %.0f (%.3f)  decided_by %s  errors %d  script calls %s",
		title, res.RPS(), res.P99, res.Admitted, res.Budget, res.Ratio(), formatCounts(res.DecidedBy), res.Errors, joinInts(res.ScriptCalls))
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if ld.wrongLimit > 0 {
		return res, l.rig.errorf("%s: %d replies carry a limit other than %d: the sluice processes do not run the lab's policy", m, ld.wrongLimit, l.cfg.Limit)
	}
	for i, n := range res.PerInstance {
		if n == 0 {
			return res, l.rig.errorf("%s: instance %d (pid %d) answered nothing: %v", m, i+1, res.Pids[i], res.FirstError)
		}
	}
	return res, nil
}

// waitFull waits until RL.PEEK sees the key's bucket full, so that the arm
// starts where its budget assumes; a key that someone else keeps using
// fails the arm.
func (l *hotLab) waitFull(ctx context.Context, c *redis.Client) error {
	var last []any
	err := poll(ctx, 50*time.Millisecond, l.cfg.refill()+10*time.Second, func() (bool, error) {
		v, err := c.Do(ctx, "RL.PEEK", HotLabKey, 1).Slice()
		switch {
		case err != nil:
			return false, l.rig.errorf("RL.PEEK %s: %w", HotLabKey, err)
		case len(v) != 6:
			return false, l.rig.errorf("RL.PEEK %s replied %d elements, want 6: %v", HotLabKey, len(v), v)
		case v[1] != l.cfg.Limit:
			return false, l.rig.errorf("RL.PEEK %s = %v: limit %v, want %d: sluice does not run the lab's policy", HotLabKey, v, v[1], l.cfg.Limit)
		}
		last = v
		return v[2] == l.cfg.Limit, nil
	})
	if errors.Is(err, errNotYet) {
		err = l.rig.errorf("the bucket of %s is not full (RL.PEEK %v) after waiting: is something else taking from it?", HotLabKey, last)
	}
	return err
}

// HotLabResult is one arm of the hot-tenant experiment: every reply of
// every instance, counted by the load goroutines.
type HotLabResult struct {
	Mode HotLabMode
	// Replies is every reply, error replies and failed requests included,
	// over all instances; PerInstance splits it by instance.
	Replies     int64
	PerInstance []int64
	Admitted    int64
	Rejected    int64
	// Errors counts error replies, failed requests and malformed replies;
	// FirstError is the first of them, "" for none.
	Errors     int64
	FirstError string
	// DecidedBy counts the decisions (admitted and rejected) by the path
	// that answered: store, split, lease, fallback-closed …
	DecidedBy map[string]int64
	// Elapsed runs from the first request sent to the last reply
	// received.
	Elapsed time.Duration
	// Budget is the most the policy allows in Elapsed from a full bucket:
	// limit + rate × Elapsed.
	Budget float64
	// P50 and P99 are reply latencies in ms: a pipeline's round trip,
	// which each of its replies shares.
	P50, P99 float64
	// ScriptCalls are the script calls each primary ran during the load,
	// in HotLabReport.Primaries order.
	ScriptCalls []int64
	// Pids are the sluice processes of the arm.
	Pids []int

	end time.Time // the last reply, for the next arm's refill wait
}

// RPS is replies per second over Elapsed, all instances together.
func (r HotLabResult) RPS() float64 {
	if r.Elapsed <= 0 {
		return math.NaN()
	}
	return float64(r.Replies) / r.Elapsed.Seconds()
}

// Ratio is Admitted ÷ Budget.
func (r HotLabResult) Ratio() float64 { return ratio(float64(r.Admitted), r.Budget) }

// TotalScriptCalls is the script calls of every primary during the load.
func (r HotLabResult) TotalScriptCalls() int64 {
	var n int64
	for _, c := range r.ScriptCalls {
		n += c
	}
	return n
}

// Own is the fraction of the decisions that the arm's own path made
// (DecidedBy of the mode): store for strict, split, lease.
func (r HotLabResult) Own() float64 {
	return ratio(float64(r.DecidedBy[r.Mode.DecidedBy()]), float64(r.Admitted+r.Rejected))
}

// fill sets the result's counts and figures from the load.
func (r *HotLabResult) fill(ld loadResult, cfg HotLabConfig) {
	r.Admitted, r.Rejected, r.Errors = ld.admitted, ld.rejected, ld.errors
	r.Replies = ld.admitted + ld.rejected + ld.errors
	r.PerInstance = ld.perClient
	r.DecidedBy = ld.by
	if ld.firstErr != nil {
		r.FirstError = ld.firstErr.Error()
	}
	if !ld.first.IsZero() {
		r.Elapsed = ld.last.Sub(ld.first)
	}
	r.end = ld.last
	r.Budget = cfg.Budget(r.Elapsed)
	r.P50 = Percentile(ld.lat, 50)
	r.P99 = Percentile(ld.lat, 99)
}

// HotLabReport is `sluice-lab hot`: the experiment (run) and what it measured.
type HotLabReport struct {
	Config    HotLabConfig // with every default applied
	Key       string       // the one key
	Owner     string       // the primary that owns it
	Primaries []string     // addresses, sorted
	Arms      []HotLabResult
	LabRun
}

// Markdown renders the report: the table, what its columns mean and the
// policy.
func (r *HotLabReport) Markdown() string { return render("hot", r) }
