package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
)

// Defaults of GlobalLabConfig.
const (
	DefaultGlobalLabDuration    = 10 * time.Second
	DefaultGlobalLabMaxRequests = 2_000_000 // per row
	DefaultGlobalLabWorkers     = 16        // per process
)

// GlobalLabConfig says what `sluice-lab global` measures. The zero value is the seed
// lab's experiment 1: capacity 100, refill 50/s, 16 goroutines per process
// each sending one RL.TAKE at a time for 10 s per row, against a new local
// cluster.
type GlobalLabConfig struct {
	// Cluster are seed nodes (host:port) of a running Redis Cluster; nil
	// starts a 3+3 cluster and stops it at the end.
	Cluster []string
	// Binary is the sluice binary; "" means sluiceBinary's.
	Binary string
	// Duration is the load of each row; 0 means 10s. MaxRequests bounds
	// the requests of each row; 0 means 2,000,000.
	Duration    time.Duration
	MaxRequests int64
	// Workers is the goroutines per sluice process, each with one request
	// in flight; 0 means 16.
	Workers int
	// Limit and Rate (per second) are the bucket; 0 means 100 and 50.
	Limit, Rate int64
	// Now is the clock of the report's date; nil means time.Now.
	Now func() time.Time
}

func (c *GlobalLabConfig) resolve() error {
	c.Duration = cmp.Or(c.Duration, DefaultGlobalLabDuration)
	c.MaxRequests = cmp.Or(c.MaxRequests, DefaultGlobalLabMaxRequests)
	c.Workers = cmp.Or(c.Workers, DefaultGlobalLabWorkers)
	c.Limit, c.Rate = cmp.Or(c.Limit, DefaultLabLimit), cmp.Or(c.Rate, DefaultLabRate)
	orNow(&c.Now)
	if c.Duration < 0 || c.MaxRequests < 0 || c.Workers < 0 || c.Limit < 0 || c.Rate < 0 {
		return errors.New("lab global: duration, max requests, workers, limit and rate must not be negative")
	}
	return nil
}

func (c *GlobalLabConfig) rig() rigSpec {
	return rigSpec{name: "lab global", binary: c.Binary, cluster: c.Cluster, now: c.Now,
		tool: "go-redis, one request in flight per goroutine", policy: seedPolicy("global", 0, c.Limit, c.Rate, "closed", 0)}
}

// config is the report's config, for RunLab.
func (r *GlobalLabReport) config() labConfig { return &r.Config }

// GlobalLabRow is one setup of the experiment.
type GlobalLabRow struct {
	Setup     string
	Processes int
	Embedded  bool // each process its own in-process bucket
	// Allowed, Rejected and Errors count every reply of every process;
	// AllowedPer splits Allowed by process.
	Allowed, Rejected, Errors int64
	AllowedPer                []int64
	FirstError                string
	DecidedBy                 map[string]int64
	// Elapsed runs from the first request sent to the last reply.
	Elapsed time.Duration
	// Expected is what one shared bucket admits in Elapsed from full:
	// limit + rate × Elapsed.
	Expected float64
	Pids     []int
}

// Ratio is Allowed ÷ Expected.
func (r GlobalLabRow) Ratio() float64 { return ratio(float64(r.Allowed), r.Expected) }

// Verdict reads the row's ratio: within 10 % of one bucket the cap holds
// (across processes when there are several), 1.5× and above is the
// overshoot of per-process buckets.
func (r GlobalLabRow) Verdict() string {
	q := r.Ratio()
	switch {
	case r.Errors > 0:
		return fmt.Sprintf("%d error replies", r.Errors)
	case q >= 1.5:
		return fmt.Sprintf("%.0f× overshoot — the lie", q)
	case q > 1.1:
		return fmt.Sprintf("cap exceeded (%.2f×)", q)
	case q < 0.9:
		return fmt.Sprintf("under the cap (%.2f×): load too low?", q)
	case r.Processes > 1:
		return "cap holds ACROSS processes"
	}
	return "cap holds"
}

// GlobalLabReport is `sluice-lab global`: the experiment (run) and what it measured.
type GlobalLabReport struct {
	Config GlobalLabConfig
	Rows   []GlobalLabRow
	LabRun
}

// run is the seed lab's experiment 1: one key through one sluice in front
// of the cluster, through two, and through two in embedded mode (each its
// own in-process bucket), each row on a fresh key for Config.Duration.
func (r *GlobalLabReport) run(ctx context.Context, rig *rig) error {
	c := r.Config
	// A fresh key per run and row starts full, also on a cluster someone
	// used before.
	stamp := c.Now().UnixNano()
	rows := []GlobalLabRow{
		{Setup: "1 process, Redis (cluster)", Processes: 1},
		{Setup: "2 processes, Redis (shared bucket)", Processes: 2},
		{Setup: "2 processes, in-process bucket (embedded mode)", Processes: 2, Embedded: true},
	}
	for i, row := range rows {
		seeds := rig.seeds
		if row.Embedded {
			seeds = nil
		}
		clients, err := rig.startSluice(ctx, row.Processes, seeds, rig.policy, c.Workers)
		if err != nil {
			return err
		}
		row.Pids = rig.pids()
		ld := drive(ctx, clients, loadSpec{
			key: fmt.Sprintf("acme:%d:%d", stamp, i), workers: c.Workers, pipeline: 1,
			duration: c.Duration, maxRequests: c.MaxRequests, limit: c.Limit,
		})
		rig.stopSluice()
		row.Allowed, row.Rejected, row.Errors, row.AllowedPer = ld.admitted, ld.rejected, ld.errors, ld.admittedPerClient
		row.DecidedBy, row.FirstError, row.Elapsed = ld.by, ld.firstError(), ld.elapsed()
		row.Expected = labBudget(c.Limit, c.Rate, row.Elapsed)
		r.Rows = append(r.Rows, row)
		rig.logf("[%d/%d] %s: allowed %d (%s per process) of expected %.0f (%.2f×), rejected %d, errors %d, decided_by %s, %v",
			i+1, len(rows), row.Setup, row.Allowed, joinInts(row.AllowedPer), row.Expected, row.Ratio(), row.Rejected, row.Errors,
			formatCounts(row.DecidedBy), row.Elapsed.Round(time.Millisecond))
		if err := ctx.Err(); err != nil {
			return err
		}
		if ld.wrongLimit > 0 {
			return rig.errorf("%s: %d replies carry a limit other than %d", row.Setup, ld.wrongLimit, c.Limit)
		}
	}
	return nil
}

// Markdown renders the seed lab's table with the measured numbers.
func (r *GlobalLabReport) Markdown() string { return render("global", r) }
