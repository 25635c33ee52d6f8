package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/policy"
)

// The workloads of RunWorkloads.
const (
	// WorkloadTenants is Keyspace tenant keys drawn as Keys says, under
	// Policy's "bench" bucket, which admits essentially everything.
	WorkloadTenants = "tenants"
	// WorkloadAbuse is Logins login keys, uniform, under WorkloadPolicy's
	// "bench-abuse" bucket of 5 a minute: after each key's first 5, the
	// load is refused. The direct side runs the script with the same
	// bucket, so both sides refuse alike.
	WorkloadAbuse = "abuse"
	// WorkloadDurable is the tenants workload (the same keys, drawn the
	// same way) under "bench-durable", the "bench" bucket with
	// durability: replica: every admitted take through sluice waits for
	// a replica (WAIT), so the row beside tenants' is its price. The
	// direct side runs the script alone, without WAIT, as for tenants.
	WorkloadDurable = "durable"
	// WorkloadHot is one key, under Policy's "bench" bucket with no hot
	// block: the default protection, so once the key is hot on sluice
	// (500 requests/s) its decisions spend tokens leased in process. The
	// direct side runs the script on that one key, on its one primary.
	WorkloadHot = "hot"
)

// Defaults of WorkloadConfig.
const (
	DefaultLogins          = 1_000
	DefaultWorkloadWarmup  = 2_000
	DefaultWorkloadSeed    = 1
	abusePolicy            = "bench-abuse"
	abuseLimitPerMinute    = 5
	defaultWorkloadKeyBase = "tenant"
	abuseKeyBase           = "login"
	durablePolicy          = "bench-durable"
	durableKeyBase         = "durable"
	hotKeyBase             = "hot"
)

// WorkloadPolicy is the policy file of RunWorkloads' sluice, with no hot
// block: "bench-abuse" (5 a minute) for the abuse workload's keys, then
// Policy's catch-all "bench", which admits essentially everything.
var WorkloadPolicy = policyFile("written by sluice-lab bench --keys/--workload: abuse keys at 5/min, everything else admitted, durable keys once a replica has them", time.Second,
	labPolicy{name: abusePolicy, match: abuseKeyBase + ":*", limit: abuseLimitPerMinute, rate: abuseLimitPerMinute, period: time.Minute, onError: "closed"},
	labPolicy{name: durablePolicy, match: durableKeyBase + ":*", limit: 1_000_000_000, rate: 1_000_000_000, onError: "closed", durability: "replica"},
	labPolicy{name: "bench", match: "*", limit: 1_000_000_000, rate: 1_000_000_000, onError: "closed"})

// KeyDist is how a tenants run draws its keys: uniform over the keyspace
// (Zipf 0) or Zipf with exponent Zipf > 1 (math/rand/v2's, key 0 the
// most frequent).
type KeyDist struct{ Zipf float64 }

// ParseKeys reads --keys: "uniform" or "zipf:S" with S > 1.
func ParseKeys(s string) (KeyDist, error) {
	if s == "uniform" {
		return KeyDist{}, nil
	}
	v, ok := strings.CutPrefix(s, "zipf:")
	if !ok {
		return KeyDist{}, fmt.Errorf("keys %q: want uniform or zipf:S", s)
	}
	z, err := strconv.ParseFloat(v, 64)
	if err != nil || !(z > 1) {
		return KeyDist{}, fmt.Errorf("keys %q: the Zipf exponent must be a number above 1", s)
	}
	return KeyDist{Zipf: z}, nil
}

func (k KeyDist) String() string {
	if k.Zipf > 1 {
		return "zipf:" + strconv.FormatFloat(k.Zipf, 'g', -1, 64)
	}
	return "uniform"
}

// WorkloadConfig says what RunWorkloads measures; zero fields take the
// defaults in their comments.
type WorkloadConfig struct {
	Binary     string   // sluice; "" means sluiceBinary's
	Cluster    []string // seeds of a running cluster; nil starts a 3+3 one
	Keys       KeyDist  // the tenants' keys; zero: uniform
	Workloads  []string // WorkloadTenants, WorkloadAbuse; nil: tenants
	Clients    int      // callers per side (50)
	Depths     []int    // requests in flight per caller, a run each (1, 16)
	Requests   int      // per run (200,000)
	Keyspace   int      // tenant keys (1,000,000)
	Logins     int      // abuse keys (1,000)
	Rounds     int      // rounds, the sides alternating in each (2)
	Warmup     int      // unrecorded tenant requests per side first (2,000; -1 none)
	Seed       uint64   // of the key sequences (1)
	RunTimeout time.Duration
	// MarkdownPath, when set, receives the report.
	MarkdownPath string
	Now          func() time.Time
}

// resolve applies the defaults and checks the config.
func (c *WorkloadConfig) resolve() error {
	orDefault(&c.Clients, DefaultClients)
	orDefault(&c.Requests, DefaultRequests)
	orDefault(&c.Keyspace, DefaultKeyspace)
	orDefault(&c.Logins, DefaultLogins)
	orDefault(&c.Rounds, DefaultRounds)
	orDefault(&c.RunTimeout, DefaultRunTimeout)
	switch c.Warmup {
	case 0:
		c.Warmup = DefaultWorkloadWarmup
	case -1:
		c.Warmup = 0
	}
	if c.Seed == 0 {
		c.Seed = DefaultWorkloadSeed
	}
	if len(c.Depths) == 0 {
		c.Depths = slices.Clone(DefaultPipelines)
	}
	if len(c.Workloads) == 0 {
		c.Workloads = []string{WorkloadTenants}
	}
	orNow(&c.Now)
	var errs []error
	for _, d := range c.Depths {
		if d < 1 {
			errs = append(errs, fmt.Errorf("depths must be at least 1, got %d", d))
		}
	}
	for _, w := range c.Workloads {
		if w != WorkloadTenants && w != WorkloadAbuse && w != WorkloadDurable && w != WorkloadHot {
			errs = append(errs, fmt.Errorf("workload %q: want %s, %s, %s or %s", w, WorkloadTenants, WorkloadAbuse, WorkloadDurable, WorkloadHot))
		}
	}
	if c.Keys.Zipf != 0 && !(c.Keys.Zipf > 1) {
		errs = append(errs, fmt.Errorf("the Zipf exponent must be above 1, got %g", c.Keys.Zipf))
	}
	if c.Warmup < 0 {
		errs = append(errs, fmt.Errorf("warmup must be -1, 0 or positive, got %d", c.Warmup))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// WorkloadRun is one run: one side, one workload, one depth, one round.
type WorkloadRun struct {
	Round    int
	Workload string
	Depth    int
	Side     Side // Sluice or Direct
	// Keys is the prefix of the run's keys: every run has its own, so
	// each starts from empty buckets.
	Keys string
	// Requests were sent; Admitted and Refused are the replies.
	Requests, Admitted, Refused int64
	// Decisions is what sluice's INFO counted (decisions) on the sluice
	// side, the replies that were decisions on the direct side; both
	// must equal Requests.
	Decisions int64
	// ByStore is the sluice replies decided_by store, ByDenyCache those
	// decided_by deny-cache (refusals the store gave a moment before,
	// answered by sluice without asking it again), ByLease those decided
	// by lease (keys hot on sluice, served from tokens it claimed).
	ByStore, ByDenyCache, ByLease int64
	// ScriptCalls are the primaries' EVAL/EVALSHA calls during the run:
	// one per request direct, one per batch through sluice.
	ScriptCalls int64
	Elapsed     time.Duration
	RPS         float64
	P50, P99    float64 // ms, the round trip of a caller's batch
	// RedisCPU is µs of the primaries' used_cpu_sys + used_cpu_user
	// (INFO cpu) over the run per decision.
	RedisCPU float64
	// SluiceCPU is µs of the sluice process's user + system CPU
	// (/proc/<pid>/stat) over the run per decision, on the sluice side;
	// NaN on the direct side, or where /proc cannot be read.
	SluiceCPU float64
}

// PerCall is decisions per script call.
func (r WorkloadRun) PerCall() float64 { return ratio(float64(r.Decisions), float64(r.ScriptCalls)) }

// AdmittedShare is the share of requests admitted, in percent.
func (r WorkloadRun) AdmittedShare() float64 {
	return 100 * ratio(float64(r.Admitted), float64(r.Requests))
}

// WorkloadSide is one side of a row: the medians over its rounds, and
// the lowest and highest requests/s.
type WorkloadSide struct {
	RPS, RedisCPU, SluiceCPU, P50, P99, PerCall, AdmittedShare float64
	MinRPS, MaxRPS                                             float64
}

// WorkloadRow is one workload at one depth, both sides.
type WorkloadRow struct {
	Workload       string
	Depth          int
	Label          string // what the row measures, for the table
	Sluice, Direct WorkloadSide
}

// Ratio is sluice's median requests/s over direct's.
func (r WorkloadRow) Ratio() float64 { return ratio(r.Sluice.RPS, r.Direct.RPS) }

// CPURatio is sluice's median Redis CPU per decision over direct's.
func (r WorkloadRow) CPURatio() float64 { return ratio(r.Sluice.RedisCPU, r.Direct.RedisCPU) }

// WorkloadReport is RunWorkloads' result.
type WorkloadReport struct {
	Config  WorkloadConfig
	Machine Machine
	Runs    []WorkloadRun
	Rows    []WorkloadRow
	Elapsed time.Duration
	Policy  string
}

// Markdown is the report.
func (rep *WorkloadReport) Markdown() string { return render("workload", rep) }

// label says what a row measures.
func (c WorkloadConfig) label(workload string, depth int) string {
	inFlight := fmt.Sprintf("%d in flight per caller", depth)
	if workload == WorkloadAbuse {
		return fmt.Sprintf("%s logins over their limit (%d/min), %s", thousands(float64(c.Logins)), abuseLimitPerMinute, inFlight)
	}
	if workload == WorkloadHot {
		return "one hot key (default lease), " + inFlight
	}
	keys := "uniform"
	if c.Keys.Zipf > 1 {
		keys = "Zipf s = " + strconv.FormatFloat(c.Keys.Zipf, 'g', -1, 64)
	}
	if workload == WorkloadDurable {
		return fmt.Sprintf("%s tenants, %s, durability: replica, %s", thousands(float64(c.Keyspace)), keys, inFlight)
	}
	return fmt.Sprintf("%s tenants, %s, %s", thousands(float64(c.Keyspace)), keys, inFlight)
}

// aggregate fills Rows from Runs: per workload and depth, in the order
// they ran, each side's medians.
func (rep *WorkloadReport) aggregate() {
	rep.Rows = nil
	for _, w := range rep.Config.Workloads {
		for _, d := range rep.Config.Depths {
			row := WorkloadRow{Workload: w, Depth: d, Label: rep.Config.label(w, d)}
			row.Sluice = rep.side(w, d, Sluice)
			row.Direct = rep.side(w, d, Direct)
			rep.Rows = append(rep.Rows, row)
		}
	}
}

func (rep *WorkloadReport) side(w string, d int, s Side) WorkloadSide {
	var rps, cpu, own, p50, p99, per, adm []float64
	for _, r := range rep.Runs {
		if r.Workload == w && r.Depth == d && r.Side == s {
			rps, cpu, p50, p99 = append(rps, r.RPS), append(cpu, r.RedisCPU), append(p50, r.P50), append(p99, r.P99)
			per, adm, own = append(per, r.PerCall()), append(adm, r.AdmittedShare()), append(own, r.SluiceCPU)
		}
	}
	out := WorkloadSide{RPS: Median(rps), RedisCPU: Median(cpu), SluiceCPU: Median(own), P50: Median(p50), P99: Median(p99),
		PerCall: Median(per), AdmittedShare: Median(adm)}
	if len(rps) > 0 {
		out.MinRPS, out.MaxRPS = slices.Min(rps), slices.Max(rps)
	}
	return out
}

// Spread is "min–max" requests/s of a side over its rounds.
func (s WorkloadSide) Spread() string { return thousands(s.MinRPS) + "–" + thousands(s.MaxRPS) }

// Command is the `sluice-lab bench` command line that reproduces the report
// on the cluster it ran on (without --cluster when the rig started one).
func (rep *WorkloadReport) Command() string {
	c := rep.Config
	parts := []string{"sluice-lab bench"}
	if len(c.Cluster) > 0 {
		parts = append(parts, "--cluster "+strings.Join(c.Cluster, ","))
	}
	depths := make([]string, len(c.Depths))
	for i, d := range c.Depths {
		depths[i] = strconv.Itoa(d)
	}
	parts = append(parts, "--keys "+c.Keys.String(), "--workload "+strings.Join(c.Workloads, ","),
		"--keyspace "+strconv.Itoa(c.Keyspace), "--logins "+strconv.Itoa(c.Logins), "--clients "+strconv.Itoa(c.Clients),
		"--pipelines "+strings.Join(depths, ","), "--requests "+strconv.Itoa(c.Requests), "--rounds "+strconv.Itoa(c.Rounds))
	return strings.Join(parts, " ")
}

// write prints the report to stdout and to MarkdownPath when set.
func (rep *WorkloadReport) write(stdout io.Writer) error {
	md := rep.Markdown()
	fmt.Fprint(stdout, md)
	if rep.Config.MarkdownPath == "" {
		return nil
	}
	return os.WriteFile(rep.Config.MarkdownPath, []byte(md), 0o644)
}

// workloadBuckets are the buckets of WorkloadPolicy by workload, which
// the direct side passes to the script.
func workloadBuckets() (map[string]limit.Bucket, error) {
	set, err := policy.Parse([]byte(WorkloadPolicy), "bench.yaml")
	if err != nil {
		return nil, fmt.Errorf("bench: the built-in policy: %w", err)
	}
	out := map[string]limit.Bucket{}
	for w, name := range map[string]string{WorkloadTenants: "bench", WorkloadAbuse: abusePolicy, WorkloadDurable: durablePolicy, WorkloadHot: "bench"} {
		b, err := set.Lookup(name).Bucket()
		if err != nil {
			return nil, fmt.Errorf("bench: the built-in policy %s: %w", name, err)
		}
		out[w] = b
	}
	return out, nil
}
