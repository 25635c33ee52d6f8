package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/policy"
)

// rig is what every experiment runs on, so that a lab file holds only its
// experiment: the sluice binary, a temporary folder for policy files, the
// cluster (its own or the user's) and the sluice processes it started,
// each stopped by its pid in close. Not safe for concurrent use.
type rig struct {
	name     string // "lab global", "bench": the prefix of progress lines and errors
	bin      string
	dir      string
	policy   string // the path of rigSpec.policy's file; "" without one
	rules    string // rigSpec.policy, the text of that file
	seeds    []string
	rc       *localredis.Cluster // nil when the cluster was given
	progress io.Writer
	redis    string // redis_version of the cluster
	sluice   string // sluice_version of the first sluice process started
	children []*child
	clients  []*redis.Client
}

// rigSpec is what an experiment asks of the rig.
type rigSpec struct {
	// name is the experiment's, "lab global": it starts progress lines
	// and errors, and names the policy file.
	name string
	// binary is the sluice binary; "" means sluiceBinary's.
	binary string
	// cluster are the seeds of a running cluster; nil starts a 3+3
	// cluster with cluster-node-timeout nodeTimeout (0: localredis's
	// default), stopped at the end.
	cluster     []string
	nodeTimeout time.Duration
	// policy is the text of a policy file to write, checked, before the
	// experiment; "" writes none.
	policy string
	// now is the clock of the report's date, tool how the load is driven:
	// the report's machine line.
	now  func() time.Time
	tool string
}

// LabRun is what every lab's report says of the run itself.
type LabRun struct {
	Machine Machine
	// Elapsed is the whole run, the set-up of the cluster and the sluice
	// processes included.
	Elapsed time.Duration
	// Policy is the policy file the sluice processes ran with; "" when
	// the experiment writes its own.
	Policy string
}

func (f *LabRun) frame() *LabRun { return f }

// labConfig is a lab's config: resolve applies its defaults in place and
// checks it, rig says what the experiment needs of the rig.
type labConfig interface {
	resolve() error
	rig() rigSpec
}

// Experiment is a lab's report type, which is what a lab file holds: its
// config, the experiment itself (run, which fills the report it is a
// method of), the report's frame (LabRun, embedded) and the report's
// text; RunLab does the rest. The experiments: *GlobalLabReport (is the
// limit global?), *PartitionLabReport (the owning primary frozen),
// *RestartLabReport (flushed, restarted, failed over), *LatencyLabReport
// (what one decision costs), *HotLabReport (one hot key in each hot-key
// mode), *OverloadLabReport (a surge of clients), *RegionsLabReport
// (per-region budgets of a global one).
type Experiment interface {
	Markdown() string
	config() labConfig
	run(ctx context.Context, r *rig) error
	frame() *LabRun
}

// Defaults applies the experiment's defaults to the zero fields of its
// config, as RunLab does: for a command line's flag defaults. It fails on
// a config RunLab would refuse.
func Defaults(rep Experiment) error { return rep.config().resolve() }

// RunLab runs the experiment whose report rep is, with rep.Config as it
// is given (zero fields take their defaults): it sets up a rig as the
// config asks (a cluster, a policy file), runs the experiment, which fills
// rep, stops whatever the rig started, by pid, and notes the machine and
// the time the whole run took. Progress lines go to progress (nil
// discards them). On an error rep holds what was measured so far.
func RunLab[R Experiment](ctx context.Context, rep R, progress io.Writer) (R, error) {
	began := time.Now()
	cfg := rep.config()
	if err := cfg.resolve(); err != nil {
		return rep, err
	}
	spec := cfg.rig()
	r, err := newRig(ctx, spec, progress)
	if err != nil {
		return rep, err
	}
	defer r.close()
	err = rep.run(ctx, r)
	*rep.frame() = LabRun{Machine: r.machine(spec.now(), spec.tool), Elapsed: time.Since(began), Policy: spec.policy}
	return rep, err
}

// newRig finds the binary, makes the folder, starts the cluster unless
// spec names one and writes the policy file. The caller must call close.
func newRig(ctx context.Context, spec rigSpec, progress io.Writer) (*rig, error) {
	if progress == nil {
		progress = io.Discard
	}
	r := &rig{name: spec.name, bin: spec.binary, seeds: spec.cluster, progress: progress, sluice: "unknown"}
	file := strings.ReplaceAll(r.name, " ", "-")
	dir, err := os.MkdirTemp("", "sluice-"+file+"-")
	if err != nil {
		return nil, r.errorf("%w", err)
	}
	r.dir = dir
	if r.bin == "" {
		if r.bin, err = sluiceBinary(ctx, dir, r.logf); err != nil {
			_ = os.RemoveAll(dir)
			return nil, r.errorf("%w", err)
		}
	}
	if len(r.seeds) == 0 {
		r.logf("starting a Redis Cluster (3 primaries, 3 replicas, cluster-node-timeout %v)", cmp.Or(spec.nodeTimeout, 5*time.Second))
		rc, err := localredis.Start(ctx, localredis.Config{NodeTimeout: spec.nodeTimeout, Log: linePrefix{progress, r.name + ": "}})
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		r.rc = rc
		r.seeds = rc.Addrs()
	}
	r.redis = redisVersion(ctx, r.seeds)
	if r.rules = spec.policy; spec.policy != "" {
		if r.policy, err = r.writePolicy(file+".yaml", spec.policy); err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
}

func (r *rig) logf(format string, args ...any) {
	fmt.Fprintf(r.progress, r.name+": "+format+"\n", args...)
}

// errorf is an error of this experiment: its name, then the message.
func (r *rig) errorf(format string, args ...any) error {
	return fmt.Errorf(r.name+": "+format, args...)
}

// close stops the sluice processes and the cluster this rig started and
// removes its folder.
func (r *rig) close() {
	r.stopSluice()
	if r.rc != nil {
		if err := r.rc.Stop(); err != nil {
			r.logf("stopping the cluster: %v", err)
		}
	}
	_ = os.RemoveAll(r.dir)
}

// stopSluice stops every sluice process started so far, each by its pid.
func (r *rig) stopSluice() {
	for _, c := range r.clients {
		_ = c.Close()
	}
	r.clients = nil
	pids := r.pids()
	for _, ch := range r.children {
		ch.stop()
	}
	if len(pids) > 0 {
		r.logf("sluice pids %v stopped", pids)
	}
	r.children = nil
}

// pids are the sluice processes running now.
func (r *rig) pids() []int {
	var pids []int
	for _, ch := range r.children {
		pids = append(pids, ch.pid())
	}
	return pids
}

// writePolicy writes a policy file named name into the folder, after
// checking that sluice will accept it, and returns its path.
func (r *rig) writePolicy(name, yaml string) (string, error) {
	if _, err := policy.Parse([]byte(yaml), name); err != nil {
		return "", r.errorf("the policy: %w", err)
	}
	path := filepath.Join(r.dir, name)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		return "", r.errorf("%w", err)
	}
	return path, nil
}

// startSluice starts n `sluice serve` processes with the policy file at
// config, in front of seeds (nil: embedded mode, each process its own
// in-process store), and returns one client for each with a pool of
// workers connections.
func (r *rig) startSluice(ctx context.Context, n int, seeds []string, config string, workers int) ([]*redis.Client, error) {
	var out []*redis.Client
	first := len(r.children)
	for range n {
		c, err := r.startOne(ctx, seeds, config, redis.Options{PoolSize: workers + 1, MinIdleConns: workers})
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	store := "embedded"
	if len(seeds) > 0 {
		store = "cluster " + strings.Join(seeds, ",")
	}
	r.logf("started %d × %s serve (%s) --config %s: pids %v", n, r.bin, store, config, r.pids()[first:])
	return out, nil
}

// startOne starts one `sluice serve` in front of seeds with the policy
// file at config and extra flags, and returns a client of it with opts
// (Addr, and RESP2 without retries or CLIENT SETINFO, set here). The rig
// stops the process and closes the client; the first client started
// reads the rig's sluice version.
func (r *rig) startOne(ctx context.Context, seeds []string, config string, opts redis.Options, extra ...string) (*redis.Client, error) {
	ch, err := startChild(ctx, r.bin, seeds, config, extra...)
	if err != nil {
		return nil, err
	}
	r.children = append(r.children, ch)
	opts.Addr, opts.MaxRetries, opts.DisableIdentity, opts.Protocol = ch.addr, -1, true, 2
	c := redis.NewClient(&opts)
	r.clients = append(r.clients, c)
	if r.sluice == "unknown" {
		r.sluice = sluiceVersion(ctx, c)
	}
	return c, nil
}

// machine describes where the experiment ran; tool says how the load was
// driven.
func (r *rig) machine(now time.Time, tool string) Machine {
	return machine(now, r.sluice, r.redis, tool)
}

// orNow sets a nil clock to time.Now.
func orNow(now *func() time.Time) {
	if *now == nil {
		*now = time.Now
	}
}

// orDefault sets *v to def when it is zero or less: a config's "zero
// means the default".
func orDefault[T int | int64 | float64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// policySet parses the rig's policy file.
func (r *rig) policySet() (*policy.Set, error) {
	set, err := policy.Parse([]byte(r.rules), r.policy)
	if err != nil {
		return nil, r.errorf("the policy: %w", err)
	}
	return set, nil
}

// openStore opens the rig's cluster as a store of pol's bucket: the
// script loaded on every primary. The caller must close it.
func (r *rig) openStore(ctx context.Context, pol *limit.Policy) (*store, error) {
	bucket, err := pol.Bucket()
	if err != nil {
		return nil, r.errorf("the policy: %w", err)
	}
	return openStore(ctx, r.seeds, bucket)
}

// labPolicy is one policy of an experiment's policy file.
type labPolicy struct {
	name, match string
	limit, rate int64
	period      time.Duration // 0 means 1s
	onError     string
	localShare  float64 // 0: not written (the default)
	// hot, threshold and split are the hot section; no section when hot
	// is "".
	hot       string
	threshold int64
	split     int
	// durability is written when set (none | replica).
	durability string
}

// seedPolicy is the policy file of the seed lab's experiments: one
// catch-all token bucket, "acme", of burst tokens refilled rate per
// second, hot mode off (they watch the store path and the failure policy,
// which the default lease would take a hammered key away from); timeout
// and share 0 are not written (the defaults).
func seedPolicy(lab string, timeout time.Duration, burst, rate int64, onError string, share float64) string {
	return policyFile("written by sluice-lab "+lab, timeout,
		labPolicy{name: "acme", match: "*", limit: burst, rate: rate, onError: onError, localShare: share, hot: "off"})
}

// policyFile renders an experiment's policy file: a comment line, the
// store timeout (0: not written, the default) and the policies.
func policyFile(comment string, timeout time.Duration, ps ...labPolicy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", comment)
	if timeout != 0 {
		fmt.Fprintf(&b, "timeout: %s\n", timeout)
	}
	b.WriteString("policies:\n")
	for _, p := range ps {
		fmt.Fprintf(&b, "  - name: %s\n    match: %q\n    limit: %d\n    rate: %d\n    period: %s\n    on_store_error: %s\n",
			p.name, p.match, p.limit, p.rate, cmp.Or(p.period, time.Second), p.onError)
		if p.localShare != 0 {
			fmt.Fprintf(&b, "    local_share: %g\n", p.localShare)
		}
		if p.durability != "" {
			fmt.Fprintf(&b, "    durability: %s\n", p.durability)
		}
		switch {
		case p.hot == string(limit.HotOff) && p.threshold == 0:
			b.WriteString("    hot:\n      mode: off\n")
		case p.hot != "":
			fmt.Fprintf(&b, "    hot:\n      mode: %s\n      threshold: %d\n      split: %d\n", p.hot, p.threshold, p.split)
		}
	}
	return b.String()
}

// sleep waits d, or less when ctx is done first, whose error it then
// returns.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errNotYet is what poll returns when within passed without success.
var errNotYet = errors.New("not within the time allowed")

// poll calls try every interval until it reports done or an error, or
// within has passed (errNotYet), or ctx is done.
func poll(ctx context.Context, interval, within time.Duration, try func() (bool, error)) error {
	deadline := time.Now().Add(within)
	for {
		done, err := try()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return errNotYet
		}
		if err := sleep(ctx, interval); err != nil {
			return err
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

// The bucket of the seed lab's experiments: capacity 100, refill 50/s.
const (
	DefaultLabLimit = 100
	DefaultLabRate  = 50 // per second
)

// labBudget is what one bucket of burst tokens refilled at rate per second
// admits in elapsed when it starts full: burst + rate × elapsed.
func labBudget(burst, rate int64, elapsed time.Duration) float64 {
	return float64(burst) + float64(rate)*elapsed.Seconds()
}

// sluiceVersion asks a sluice process for its version; "unknown" if it
// does not say.
func sluiceVersion(ctx context.Context, c *redis.Client) string {
	if info, err := c.Do(ctx, "INFO", "server").Text(); err == nil {
		if v := infoFields(info)["sluice_version"]; v != "" {
			return v
		}
	}
	return "unknown"
}

// redisVersion asks the cluster for redis_version; "unknown" if it does
// not answer.
func redisVersion(ctx context.Context, seeds []string) string {
	if len(seeds) == 0 {
		return "none"
	}
	c := redis.NewClient(&redis.Options{Addr: seeds[0], MaxRetries: -1, DisableIdentity: true})
	defer c.Close()
	if info, err := c.Info(ctx, "server").Result(); err == nil {
		if v := infoFields(info)["redis_version"]; v != "" {
			return v
		}
	}
	return "unknown"
}

// takeOnce sends one RL.TAKE key 1 and returns the reply.
func takeOnce(ctx context.Context, c *redis.Client, key string) ([]any, error) {
	v, err := c.Do(ctx, "RL.TAKE", key, 1).Slice()
	if err == nil {
		err = checkTake(v)
	}
	if err != nil {
		return nil, fmt.Errorf("RL.TAKE %s: %w", key, err)
	}
	return v, nil
}

// mustStore takes one token of key through c and fails unless the store
// decided it: the experiment starts from strict decisions.
func mustStore(ctx context.Context, c *redis.Client, key string) error {
	v, err := takeOnce(ctx, c, key)
	if err != nil {
		return err
	}
	if v[5] != limit.ByStore {
		return fmt.Errorf("RL.TAKE %s = %v before the fault: want decided_by %s", key, v, limit.ByStore)
	}
	return nil
}

// waitStore sends RL.TAKE key through c every 5 ms until the store decides
// it, and returns when that reply came. An error reply or within passing
// ends it with an error.
func waitStore(ctx context.Context, c *redis.Client, key string, within time.Duration) (time.Time, error) {
	var at time.Time
	var last []any
	err := poll(ctx, 5*time.Millisecond, within, func() (bool, error) {
		v, err := takeOnce(ctx, c, key)
		at, last = time.Now(), v
		return err == nil && v[5] == limit.ByStore, err
	})
	if errors.Is(err, errNotYet) {
		err = fmt.Errorf("%s: no strict decision within %v: %v", key, within, last)
	}
	return at, err
}

// maxDuration is the largest of d, 0 when empty.
func maxDuration(d []time.Duration) time.Duration {
	var m time.Duration
	for _, x := range d {
		m = max(m, x)
	}
	return m
}
