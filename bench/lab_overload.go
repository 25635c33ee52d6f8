package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults and bounds of OverloadLabConfig.
const (
	DefaultOverloadLabRequests = 200_000 // per step and side
	DefaultOverloadLabTimeout  = 100 * time.Millisecond
	DefaultOverloadLabKeyspace = 1_000_000
	DefaultOverloadLabWarmup   = 20_000
	// MaxOverloadLabClients is the most clients of one step: sluice's
	// default --max-clients, and redis-benchmark 7's event loop holds
	// 10,240 descriptors.
	MaxOverloadLabClients  = 10_000
	MaxOverloadLabRequests = 10_000_000
	overloadLabRunTimeout  = 5 * time.Minute
	// overloadLabSpareFiles is what redis-benchmark opens besides its
	// clients: the config fetch, the cluster preamble, stdio.
	overloadLabSpareFiles = 64
	// The tenant policy of the issue: limit 100, rate 50/s, on_store_error open.
	overloadTenantLimit = 100
	overloadTenantRate  = 50
	// overloadUniformLimit is the catch-all's limit and rate: the uniform
	// load is never rejected by its bucket, only by overload.
	overloadUniformLimit = 1_000_000_000
)

// DefaultOverloadLabClients and DefaultOverloadLabTenantClients are the
// client counts of the zero config: the surge, and its one-tenant
// case.
var (
	DefaultOverloadLabClients       = []int{50, 200, 1000, 3000, 5000}
	DefaultOverloadLabTenantClients = []int{50, 5000}
)

// OverloadLabConfig says what `sluice-lab overload` measures. The zero
// value: one sluice with `timeout: 100ms` in front of a new local 3+3
// cluster, redis-benchmark at 50, 200, 1,000, 3,000 and 5,000 clients,
// 200,000 requests a step and side; the one-tenant case at 50 and 5,000.
type OverloadLabConfig struct {
	// Cluster are seed nodes (host:port) of a running Redis Cluster; nil
	// starts a 3+3 cluster and stops it at the end.
	Cluster []string
	// Binary is the sluice binary; "" means sluiceBinary's.
	// RedisBenchmark is the redis-benchmark binary; "" means the one on
	// PATH.
	Binary, RedisBenchmark string
	// Clients are the client counts of the uniform steps, in order; nil
	// means 50, 200, 1000, 3000, 5000. TenantClients are those of the
	// one-tenant steps; nil means 50, 5000. Each at most 10,000.
	Clients, TenantClients []int
	// Requests is redis-benchmark's -n of every step and side; 0 means
	// 200,000, at least the step's clients, at most 10,000,000.
	Requests int
	// Warmup is the requests through sluice at 50 clients before the
	// first step, so that its model of the nodes' service times has
	// samples; 0 means 20,000 (at most Requests).
	Warmup int
	// Timeout is the policy file's store deadline; 0 means 100ms.
	Timeout time.Duration
	// Keyspace is redis-benchmark's -r of the uniform steps; 0 means
	// 1,000,000.
	Keyspace int
	// Now is the clock of the report's date; nil means time.Now.
	Now func() time.Time
}

func (c *OverloadLabConfig) resolve() error {
	if c.Clients == nil {
		c.Clients = slices.Clone(DefaultOverloadLabClients)
	}
	if c.TenantClients == nil {
		c.TenantClients = slices.Clone(DefaultOverloadLabTenantClients)
	}
	c.RedisBenchmark = cmp.Or(c.RedisBenchmark, "redis-benchmark")
	c.Requests = cmp.Or(c.Requests, DefaultOverloadLabRequests)
	c.Warmup = min(cmp.Or(c.Warmup, DefaultOverloadLabWarmup), c.Requests)
	c.Timeout = cmp.Or(c.Timeout, DefaultOverloadLabTimeout)
	c.Keyspace = cmp.Or(c.Keyspace, DefaultOverloadLabKeyspace)
	orNow(&c.Now)
	if len(c.Clients) == 0 && len(c.TenantClients) == 0 {
		return errors.New("lab overload: no client counts")
	}
	if c.Requests < 0 || c.Requests > MaxOverloadLabRequests {
		return fmt.Errorf("lab overload: requests %d: want 1…%d", c.Requests, MaxOverloadLabRequests)
	}
	for _, n := range slices.Concat(c.Clients, c.TenantClients) {
		if n < 1 || n > MaxOverloadLabClients {
			return fmt.Errorf("lab overload: %d clients: want 1…%d", n, MaxOverloadLabClients)
		}
		if n > c.Requests {
			return fmt.Errorf("lab overload: %d clients but %d requests a step: every client must send one", n, c.Requests)
		}
	}
	if c.Timeout < 0 || c.Warmup < 0 || c.Keyspace < 0 {
		return errors.New("lab overload: timeout, warm-up and keyspace must not be negative")
	}
	return nil
}

func (c *OverloadLabConfig) rig() rigSpec {
	return rigSpec{name: "lab overload", binary: c.Binary, cluster: c.Cluster, now: c.Now,
		tool: benchmarkVersion(c.RedisBenchmark) + ", one client per connection, pipeline 1", policy: overloadPolicy(c.Timeout)}
}

// overloadPolicy is the config: the one tenant first (first match
// wins), a catch-all that never rejects by its bucket after it.
func overloadPolicy(timeout time.Duration) string {
	return policyFile("written by sluice-lab overload", timeout,
		labPolicy{name: "tenant", match: "tenant:*", limit: overloadTenantLimit, rate: overloadTenantRate, onError: "open"},
		labPolicy{name: "uniform", match: "*", limit: overloadUniformLimit, rate: overloadUniformLimit, onError: "closed"})
}

// config is the report's config, for RunLab.
func (rep *OverloadLabReport) config() labConfig { return &rep.Config }

// The sides of a uniform step.
const (
	OverloadSluice = "sluice"
	OverloadDirect = "direct EVALSHA"
)

// OverloadLabRow is one uniform step of one side: redis-benchmark's
// summary and the counters read around it.
type OverloadLabRow struct {
	Clients int
	Side    string // OverloadSluice or OverloadDirect
	Result
	Requests int
	// Elapsed is redis-benchmark's whole run, its connecting included.
	Elapsed time.Duration
	// Connections is the connections the server side accepted during the
	// run (sluice's, or the primaries' summed); Peak the most connected
	// at once that polling saw.
	Connections, Peak int64
	// Decisions and DecidedBy are sluice's INFO deltas; the direct side
	// has none (its every request is one script call).
	Decisions int64
	DecidedBy map[string]int64
	// BreakerOpens and Overload are the deltas of the node_ lines'
	// breaker_opens and overload, summed over the nodes.
	BreakerOpens, Overload int64
	// ScriptCalls is the primaries' EVAL and EVALSHA calls, summed.
	ScriptCalls int64
	// OwnP99 is sluice's own p99 time per request, from reading it to
	// writing its reply, in ms: the upper bound of its histogram bucket
	// (INFO request_duration_us); NaN on the direct side.
	OwnP99 float64
}

// OwnP99Cell is OwnP99 as a table cell: "≤ 120" (ms), or "—".
func (r OverloadLabRow) OwnP99Cell() string {
	switch {
	case r.Direct() || math.IsNaN(r.OwnP99):
		return "—"
	case math.IsInf(r.OwnP99, 1):
		return "> 2,500"
	}
	return "≤ " + strconv.FormatFloat(r.OwnP99, 'f', -1, 64)
}

// Direct reports whether the row is redis-benchmark straight at the
// shards.
func (r OverloadLabRow) Direct() bool { return r.Side == OverloadDirect }

// Split is the row's decisions by kind: the store, the door (overload-*),
// the failure policy (fallback-*), and any other path.
func (r OverloadLabRow) Split() DecisionSplit { return splitDecisions(r.DecidedBy, r.Decisions) }

// DecisionSplit counts decisions by who made them.
type DecisionSplit struct{ Store, Overload, Fallback, Other, Total int64 }

func splitDecisions(by map[string]int64, total int64) DecisionSplit {
	s := DecisionSplit{Total: total}
	for path, n := range by {
		switch {
		case path == "store":
			s.Store += n
		case strings.HasPrefix(path, "overload-"):
			s.Overload += n
		case strings.HasPrefix(path, "fallback-"):
			s.Fallback += n
		default:
			s.Other += n
		}
	}
	return s
}

// Share is n ÷ Total; NaN without decisions.
func (s DecisionSplit) Share(n int64) float64 { return ratio(float64(n), float64(s.Total)) }

// percent renders a share as "12.3 %"; a share that is not 0 but rounds
// to it reads "< 0.1 %", so that a few fallbacks are not hidden.
func percent(share float64) string {
	if share > 0 && share < 0.0005 {
		return "< 0.1 %"
	}
	return fixed(share*100, 1) + " %"
}

// StoreCell, OverloadCell, FallbackCell and BreakerCell are the row's
// cells of the main table; the direct side has no failure policy, so only
// the store decides and there is no breaker.
func (r OverloadLabRow) StoreCell() string {
	return r.shareCell(r.Split().Store, "100 % (no failure policy)")
}

func (r OverloadLabRow) OverloadCell() string { return r.shareCell(r.Split().Overload, "—") }

func (r OverloadLabRow) FallbackCell() string { return r.shareCell(r.Split().Fallback, "—") }

func (r OverloadLabRow) BreakerCell() string {
	if r.Direct() {
		return "—"
	}
	return thousands(float64(r.BreakerOpens))
}

// shareCell is n as a share of the row's decisions; direct on the direct
// side.
func (r OverloadLabRow) shareCell(n int64, direct string) string {
	if r.Direct() {
		return direct
	}
	return percent(r.Split().Share(n))
}

// decidedLog is the row's decisions for a progress line.
func (r OverloadLabRow) decidedLog() string {
	if r.Direct() {
		return fmt.Sprintf("script calls %d", r.ScriptCalls)
	}
	return fmt.Sprintf("store %s  overload %s  fallback %s  breaker openings %d",
		r.StoreCell(), r.OverloadCell(), r.FallbackCell(), r.BreakerOpens)
}

// DecidedCell is the detail table's raw counts.
func (r OverloadLabRow) DecidedCell() string {
	if r.Direct() {
		return "script calls=" + strconv.FormatInt(r.ScriptCalls, 10)
	}
	return formatCounts(r.DecidedBy)
}

// OverloadTenantRow is one step of the one-tenant case.
type OverloadTenantRow struct {
	Clients int
	Key     string
	Result
	Requests int
	Elapsed  time.Duration
	// Window is redis-benchmark's timed window, requests ÷ requests/s:
	// from its last client connected to its last reply, when tokens are
	// taken.
	Window      time.Duration
	Connections int64
	// Admitted and Rejected are sluice's INFO deltas of allowed and
	// rejected; DecidedBy its decided_by deltas.
	Admitted, Rejected int64
	DecidedBy          map[string]int64
	BreakerOpens       int64
	// Budget is what the policy's bucket admits in Window from full,
	// limit + rate × Window; LocalShare what this instance's local bucket
	// admits besides (the same × local_share).
	Budget, LocalShare float64
}

// Ratio is Admitted ÷ Budget.
func (r OverloadTenantRow) Ratio() float64 { return ratio(float64(r.Admitted), r.Budget) }

// Verdict compares what was admitted with the target, the budget
// plus the local share (one token of rounding allowed).
func (r OverloadTenantRow) Verdict() string {
	switch {
	case r.Admitted+r.Rejected == 0:
		return "no decisions"
	case float64(r.Admitted) <= r.Budget+1:
		return "within the budget"
	case float64(r.Admitted) <= r.Budget+r.LocalShare+1:
		return "within the budget + the local share"
	}
	return fmt.Sprintf("over: %.1f× the budget", r.Ratio())
}

// OverloadLabReport is `sluice-lab overload`: the experiment (run) and
// what it measured.
type OverloadLabReport struct {
	Config OverloadLabConfig
	// Rows are the uniform steps, sluice then direct for each count;
	// Tenant the one-tenant steps.
	Rows   []OverloadLabRow
	Tenant []OverloadTenantRow
	// SluiceCommand, DirectCommand and TenantCommand are the
	// redis-benchmark command lines of the last step of each kind.
	SluiceCommand, DirectCommand, TenantCommand string
	// Files is the open-files limit redis-benchmark ran with (ulimit -n).
	Files int
	// TenantLimit, TenantRate and TenantShare are the tenant policy's.
	TenantLimit, TenantRate int64
	TenantShare             float64
	Warmup                  Result
	// LoadBefore and LoadAfter are the machine's load averages (1, 5,
	// 15 minutes) before the warm-up and after the last step: the
	// machine is shared, and its other work shows in the figures.
	LoadBefore, LoadAfter string
	LabRun
}

// Markdown renders the overload lab's tables with the measured numbers.
func (rep *OverloadLabReport) Markdown() string { return render("overload", rep) }

// run drives redis-benchmark at each client count through one sluice
// (RL.TAKE key:__rand_int__ 1) and straight at the shards (--cluster
// EVALSHA of sluice's script, as `sluice-lab bench` does), reading sluice's
// INFO and the primaries' around each run; then the one tenant key at
// each tenant count, on a fresh key each.
func (rep *OverloadLabReport) run(ctx context.Context, rig *rig) error {
	c := rep.Config
	bin, err := rep.preflight(ctx, rig)
	if err != nil {
		return err
	}
	set, err := rig.policySet()
	if err != nil {
		return err
	}
	tenant := set.Lookup("tenant")
	rep.TenantLimit, rep.TenantRate, rep.TenantShare = tenant.Limit, tenant.Rate, tenant.LocalShare
	st, err := rig.openStore(ctx, set.Lookup("uniform"))
	if err != nil {
		return err
	}
	defer st.close()
	clients, err := rig.startSluice(ctx, 1, rig.seeds, rig.policy, 2)
	if err != nil {
		return err
	}
	sl := clients[0]
	stamp := c.Now().UnixNano()
	for key, want := range map[string]int64{"key:sanity": overloadUniformLimit, fmt.Sprintf("tenant:%d:sanity", stamp): rep.TenantLimit} {
		v, err := takeOnce(ctx, sl, key)
		if err != nil {
			return rig.errorf("%w", err)
		}
		if v[1] != want || v[5] != "store" {
			return rig.errorf("RL.TAKE %s = %v: want limit %d decided by the store: sluice does not run the lab's policy", key, v, want)
		}
	}
	host, port, err := splitAddr(rig.children[0].addr)
	if err != nil {
		return err
	}
	d := overloadDriver{bin: bin, sluice: sl, store: st}

	rep.LoadBefore = loadAverage()
	defer func() { rep.LoadAfter = loadAverage() }()
	uniform := invocation{Host: host, Port: port, Pipeline: 1, Keyspace: c.Keyspace, Command: []string{"RL.TAKE", "key:__rand_int__", "1"}}
	if c.Warmup > 0 {
		in := uniform
		in.Clients, in.Requests = min(50, c.Warmup), c.Warmup
		if rep.Warmup, _, err = runBenchmark(ctx, bin, in, overloadLabRunTimeout); err != nil {
			return rig.errorf("warm-up: %w", err)
		}
		rig.logf("warm-up: %d requests at %d clients, %.0f req/s", in.Requests, in.Clients, rep.Warmup.RPS)
	}
	if err := rep.uniformSteps(ctx, rig, d, uniform); err != nil {
		return err
	}
	if err := rep.tenantSteps(ctx, rig, d, host, port, stamp); err != nil {
		return err
	}
	return ctx.Err()
}

// preflight finds redis-benchmark and checks that the largest client
// count gets its open files.
func (rep *OverloadLabReport) preflight(ctx context.Context, rig *rig) (bin string, err error) {
	c := rep.Config
	if bin, err = exec.LookPath(c.RedisBenchmark); err != nil {
		return "", rig.errorf("%w: %v", ErrNoRedisBenchmark, err)
	}
	if rep.Files, err = childFiles(ctx); err != nil {
		return "", rig.errorf("%w", err)
	}
	most := slices.Max(slices.Concat(c.Clients, c.TenantClients))
	if most+overloadLabSpareFiles > rep.Files {
		return "", rig.errorf("%d clients need %d open files in redis-benchmark, but ulimit -n is %d", most, most+overloadLabSpareFiles, rep.Files)
	}
	return bin, nil
}

// uniformSteps runs uniform keys at each client count, through sluice and
// then straight at the shards.
func (rep *OverloadLabReport) uniformSteps(ctx context.Context, rig *rig, d overloadDriver, uniform invocation) error {
	c := rep.Config
	direct, err := d.store.directUniform(c.Keyspace)
	if err != nil {
		return err
	}
	for i, n := range c.Clients {
		for _, side := range []string{OverloadSluice, OverloadDirect} {
			in := uniform
			if side == OverloadDirect {
				in = direct
			}
			in.Clients, in.Requests = n, c.Requests
			row, err := d.uniform(ctx, in, side)
			if err != nil {
				return rig.errorf("%d clients, %s: %w", n, side, err)
			}
			rep.Rows = append(rep.Rows, row)
			if side == OverloadSluice {
				rep.SluiceCommand = in.String()
			} else {
				rep.DirectCommand = in.String()
			}
			rig.logf("[%d/%d] %5d clients %-14s %8.0f req/s  p50 %s ms  p99 %s ms  %s  connections %d (peak %d)  %v",
				i+1, len(c.Clients), n, side, row.RPS, ms(row.P50), ms(row.P99), row.decidedLog(), row.Connections, row.Peak, row.Elapsed.Round(10*time.Millisecond))
		}
	}
	return nil
}

// tenantSteps runs the one tenant key at each tenant count, a fresh key
// each, through sluice at host:port.
func (rep *OverloadLabReport) tenantSteps(ctx context.Context, rig *rig, d overloadDriver, host, port string, stamp int64) error {
	c := rep.Config
	for i, n := range c.TenantClients {
		key := fmt.Sprintf("tenant:%d:%d", stamp, n)
		in := invocation{Host: host, Port: port, Clients: n, Requests: c.Requests, Pipeline: 1, Command: []string{"RL.TAKE", key, "1"}}
		row, err := d.tenant(ctx, in, key, rep.TenantLimit, rep.TenantRate, rep.TenantShare)
		if err != nil {
			return rig.errorf("tenant, %d clients: %w", n, err)
		}
		rep.Tenant = append(rep.Tenant, row)
		rep.TenantCommand = in.String()
		rig.logf("[%d/%d] tenant %5d clients: admitted %d of a budget of %.0f (+ local share %.0f): %s; decided_by %s; breaker openings %d; %.0f req/s",
			i+1, len(c.TenantClients), n, row.Admitted, row.Budget, row.LocalShare, row.Verdict(), formatCounts(row.DecidedBy), row.BreakerOpens, row.RPS)
	}
	return nil
}

// childFiles is the open-files limit a child of this process gets: Go
// raises its own soft limit, but gives children the one it started with.
func childFiles(ctx context.Context) (int, error) {
	out, err := exec.CommandContext(ctx, "sh", "-c", "ulimit -n").Output()
	if err != nil {
		return 0, fmt.Errorf("ulimit -n: %w", err)
	}
	s := strings.TrimSpace(string(out))
	if s == "unlimited" {
		return MaxOverloadLabClients * 10, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("ulimit -n printed %q", s)
	}
	return n, nil
}

// PollEvery is how often a step reads the connected clients.
func (rep *OverloadLabReport) PollEvery() time.Duration { return overloadPollEvery }

// loadAverage is the first three fields of /proc/loadavg, "n/a" where it
// cannot be read.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "n/a"
}
