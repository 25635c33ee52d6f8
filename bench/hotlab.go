package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
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

// HotLabConfig says what HotLab measures. The zero value is the
// experiment of the hot-tenant issue against a new local cluster: two
// sluice instances, 25 goroutines each sending pipelines of 16 RL.TAKE of
// one key for 5 s, once per arm.
type HotLabConfig struct {
	// Cluster are seed nodes (host:port) of a running Redis Cluster. nil
	// starts a 3-primary, 3-replica cluster in a temporary folder and
	// stops it at the end.
	Cluster []string

	// Binary is the sluice binary started for each instance; "" means
	// this executable (os.Executable), which is right for `sluice lab`.
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
func (cfg HotLabConfig) resolve() (HotLabConfig, error) {
	c := cfg
	if len(c.Modes) == 0 {
		c.Modes = slices.Clone(DefaultHotLabModes)
	}
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defDur(&c.Duration, DefaultHotLabDuration)
	def(&c.MaxRequests, DefaultHotLabMaxRequests)
	defInt(&c.Instances, DefaultHotLabInstances)
	defInt(&c.Workers, DefaultHotLabWorkers)
	defInt(&c.Pipeline, DefaultHotLabPipeline)
	def(&c.Limit, DefaultHotLabLimit)
	def(&c.Rate, DefaultHotLabRate)
	defDur(&c.Period, DefaultHotLabPeriod)
	def(&c.Threshold, DefaultHotLabThreshold)
	defInt(&c.Split, DefaultHotLabSplit)
	defDur(&c.Timeout, DefaultHotLabTimeout)
	if c.Now == nil {
		c.Now = time.Now
	}
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
		return HotLabConfig{}, fmt.Errorf("lab: %w", err)
	}
	for _, m := range c.Modes {
		if _, err := policy.Parse([]byte(c.policyYAML(m)), "hotlab-"+string(m)+".yaml"); err != nil {
			return HotLabConfig{}, fmt.Errorf("lab: the %s policy: %w", m, err)
		}
	}
	return c, nil
}

// policyYAML is the policy file of one arm.
func (cfg HotLabConfig) policyYAML(m HotLabMode) string {
	return fmt.Sprintf(`# written by sluice lab hot: the %s arm
timeout: %s
policies:
  - name: tenant
    match: "*"
    limit: %d
    rate: %d
    period: %s
    on_store_error: closed
    hot:
      mode: %s
      threshold: %d
      split: %d
`, m, cfg.Timeout, cfg.Limit, cfg.Rate, cfg.Period, m.Hot(), cfg.Threshold, cfg.Split)
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

// HotLab runs the hot-tenant experiment: for each arm it starts
// cfg.Instances sluice processes with the arm's policy in front of one
// cluster, waits until the key's bucket is full, drives the one key
// through all of them at once at the machine's top rate, counts every
// reply and stops the processes. Progress lines go to progress (nil
// discards them). Error replies are counted, not fatal; HotLab fails when
// a process or the cluster fails, or when the replies show a policy other
// than the arm's. It then returns the arms so far with the error.
func HotLab(ctx context.Context, cfg HotLabConfig, progress io.Writer) (*HotLabReport, error) {
	began := time.Now()
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	l := &hotLab{cfg: c, progress: progress}
	if l.bin = c.Binary; l.bin == "" {
		if l.bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("lab: finding the sluice binary: %w", err)
		}
	}
	set, err := policy.Parse([]byte(c.policyYAML(LabStrict)), "hotlab.yaml")
	if err != nil {
		return nil, fmt.Errorf("lab: the policy: %w", err)
	}
	bucket, err := set.Match(HotLabKey).Bucket()
	if err != nil {
		return nil, fmt.Errorf("lab: the policy: %w", err)
	}

	l.seeds = c.Cluster
	if len(l.seeds) == 0 {
		l.logf("starting a Redis Cluster (3 primaries, 3 replicas)")
		rc, err := localredis.Start(ctx, localredis.Config{Log: linePrefix{progress, "lab: "}})
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := rc.Stop(); err != nil {
				l.logf("stopping the cluster: %v", err)
			}
		}()
		l.seeds = rc.Addrs()
	}
	if l.store, err = openStore(ctx, l.seeds, bucket); err != nil {
		return nil, err
	}
	defer l.store.close()
	owner, err := l.store.owner(ctx, redisKey(HotLabKey))
	if err != nil {
		return nil, err
	}
	if l.dir, err = os.MkdirTemp("", "sluice-lab-"); err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	defer os.RemoveAll(l.dir)

	rep := &HotLabReport{
		Config:    c,
		Key:       HotLabKey,
		Owner:     owner,
		Primaries: l.store.primaries,
		Machine:   machine(c.Now(), "unknown", l.store.version, "go-redis "+redis.Version()+" pipelines"),
	}
	l.logf("%s is %s on %s; %d primaries; %d instances × %d goroutines × pipelines of %d, %v per arm",
		HotLabKey, redisKey(HotLabKey), owner, len(l.store.primaries), c.Instances, c.Workers, c.Pipeline, c.Duration)
	var lastEnd time.Time
	for i, m := range c.Modes {
		res, err := l.arm(ctx, m, fmt.Sprintf("[%d/%d] %s", i+1, len(c.Modes), m), lastEnd, &rep.Machine)
		rep.Arms = append(rep.Arms, res)
		rep.Elapsed = time.Since(began)
		if err != nil {
			return rep, err
		}
		lastEnd = res.end
	}
	rep.Elapsed = time.Since(began)
	return rep, nil
}

// hotLab holds what the arms share.
type hotLab struct {
	cfg      HotLabConfig
	bin      string
	dir      string
	seeds    []string
	store    *store
	progress io.Writer
}

func (l *hotLab) logf(format string, args ...any) {
	fmt.Fprintf(l.progress, "lab: "+format+"\n", args...)
}

// arm runs one mode: the sluice processes, a full bucket, the load. A
// previous arm's last reply at lastEnd (zero for none) left the key's
// buckets, sub-buckets included, empty; they are full again one refill
// time later.
func (l *hotLab) arm(ctx context.Context, m HotLabMode, title string, lastEnd time.Time, mach *Machine) (HotLabResult, error) {
	res := HotLabResult{Mode: m}
	path := filepath.Join(l.dir, "hotlab-"+string(m)+".yaml")
	if err := os.WriteFile(path, []byte(l.cfg.policyYAML(m)), 0o600); err != nil {
		return res, fmt.Errorf("lab: %w", err)
	}
	var clients []*redis.Client
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	var children []*child
	defer func() {
		for _, ch := range children {
			ch.stop()
		}
		if len(children) > 0 {
			l.logf("%s: sluice pids %v stopped", m, res.Pids)
		}
	}()
	for range l.cfg.Instances {
		ch, err := startChild(ctx, l.bin, l.seeds, path)
		if err != nil {
			return res, err
		}
		children = append(children, ch)
		res.Pids = append(res.Pids, ch.pid())
		clients = append(clients, redis.NewClient(&redis.Options{
			Addr: ch.addr, PoolSize: l.cfg.Workers + 1, MinIdleConns: l.cfg.Workers,
			MaxRetries: -1, DisableIdentity: true, Protocol: 2,
		}))
	}
	l.logf("%s: started %s serve --cluster %s --config %s: pids %v", m, l.bin, strings.Join(l.seeds, ","), path, res.Pids)
	if mach.Sluice == "unknown" {
		if info, err := clients[0].Do(ctx, "INFO", "server").Text(); err == nil {
			if v := infoFields(info)["sluice_version"]; v != "" {
				mach.Sluice = v
			}
		}
	}

	if !lastEnd.IsZero() {
		if wait := time.Until(lastEnd.Add(l.cfg.refill() + 100*time.Millisecond)); wait > 0 {
			l.logf("%s: waiting %v for the buckets to refill", m, wait.Round(time.Millisecond))
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return res, ctx.Err()
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
	ld := driveHot(ctx, clients, loadSpec{
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
	l.logf("%s: %.0f req/s  p99 %.3f ms  admitted %d of budget %.0f (%.3f)  decided_by %s  errors %d  script calls %s",
		title, res.RPS(), res.P99, res.Admitted, res.Budget, res.Ratio(), formatCounts(res.DecidedBy), res.Errors, joinInts(res.ScriptCalls))
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if ld.wrongLimit > 0 {
		return res, fmt.Errorf("lab: %s: %d replies carry a limit other than %d: the sluice processes do not run the lab's policy", m, ld.wrongLimit, l.cfg.Limit)
	}
	for i, n := range res.PerInstance {
		if n == 0 {
			return res, fmt.Errorf("lab: %s: instance %d (pid %d) answered nothing: %v", m, i+1, res.Pids[i], res.FirstError)
		}
	}
	return res, nil
}

// waitFull waits until RL.PEEK sees the key's bucket full, so that the arm
// starts where its budget assumes; a key that someone else keeps using
// fails the arm.
func (l *hotLab) waitFull(ctx context.Context, c *redis.Client) error {
	deadline := time.Now().Add(l.cfg.refill() + 10*time.Second)
	for {
		v, err := c.Do(ctx, "RL.PEEK", HotLabKey, 1).Slice()
		if err != nil {
			return fmt.Errorf("lab: RL.PEEK %s: %w", HotLabKey, err)
		}
		if len(v) != 6 {
			return fmt.Errorf("lab: RL.PEEK %s replied %d elements, want 6: %v", HotLabKey, len(v), v)
		}
		if v[1] != l.cfg.Limit {
			return fmt.Errorf("lab: RL.PEEK %s = %v: limit %v, want %d: sluice does not run the lab's policy", HotLabKey, v, v[1], l.cfg.Limit)
		}
		if v[2] == l.cfg.Limit {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lab: the bucket of %s is not full (RL.PEEK %v) after waiting: is something else taking from it?", HotLabKey, v)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// linePrefix marks the lines written through it.
type linePrefix struct {
	w      io.Writer
	prefix string
}

func (p linePrefix) Write(b []byte) (int, error) {
	if _, err := p.w.Write(append([]byte(p.prefix), b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// formatCounts renders decided_by counts as "lease=123 store=4", sorted.
func formatCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+strconv.FormatInt(m[k], 10))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}
