package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Defaults of GlobalLabConfig.
const (
	DefaultGlobalLabDuration    = 10 * time.Second
	DefaultGlobalLabMaxRequests = 2_000_000 // per row
	DefaultGlobalLabWorkers     = 16        // per process
)

// GlobalLabConfig says what GlobalLab measures. The zero value is the seed
// lab's experiment 1: capacity 100, refill 50/s, 16 goroutines per process
// each sending one RL.TAKE at a time for 10 s per row, against a new local
// cluster.
type GlobalLabConfig struct {
	// Cluster are seed nodes (host:port) of a running Redis Cluster; nil
	// starts a 3+3 cluster and stops it at the end.
	Cluster []string
	// Binary is the sluice binary; "" means this executable.
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

func (cfg GlobalLabConfig) resolve() (GlobalLabConfig, error) {
	c := cfg
	if c.Duration == 0 {
		c.Duration = DefaultGlobalLabDuration
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = DefaultGlobalLabMaxRequests
	}
	if c.Workers == 0 {
		c.Workers = DefaultGlobalLabWorkers
	}
	if c.Limit == 0 {
		c.Limit = DefaultLabLimit
	}
	if c.Rate == 0 {
		c.Rate = DefaultLabRate
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Duration < 0 || c.MaxRequests < 0 || c.Workers < 0 || c.Limit < 0 || c.Rate < 0 {
		return c, errors.New("lab global: duration, max requests, workers, limit and rate must not be negative")
	}
	return c, nil
}

func (cfg GlobalLabConfig) policyYAML() string {
	return fmt.Sprintf(`# written by sluice lab global
policies:
  - name: acme
    match: "*"
    limit: %d
    rate: %d
    period: 1s
    on_store_error: closed
`, cfg.Limit, cfg.Rate)
}

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

// GlobalLabReport is what GlobalLab measured.
type GlobalLabReport struct {
	Config  GlobalLabConfig
	Machine Machine
	Rows    []GlobalLabRow
	Elapsed time.Duration
}

// GlobalLab runs the seed lab's experiment 1: one key through one sluice
// in front of the cluster, through two, and through two in embedded mode
// (each its own in-process bucket), each row on a fresh key for
// cfg.Duration. It stops the processes it started and returns the rows so
// far with any error.
func GlobalLab(ctx context.Context, cfg GlobalLabConfig, progress io.Writer) (*GlobalLabReport, error) {
	began := time.Now()
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	rig, err := newLabRig(ctx, "global", c.Binary, c.Cluster, 0, progress)
	if err != nil {
		return nil, err
	}
	defer rig.close()
	path, err := rig.writePolicy("global.yaml", c.policyYAML())
	if err != nil {
		return nil, err
	}
	rep := &GlobalLabReport{Config: c, Machine: machine(c.Now(), "unknown", redisVersion(ctx, rig.seeds), "go-redis, one request in flight per goroutine")}
	// A fresh key per run and row starts full, also on a cluster someone
	// used before.
	stamp := c.Now().UnixNano()
	rows := []struct {
		setup     string
		processes int
		embedded  bool
	}{
		{"1 process, Redis (cluster)", 1, false},
		{"2 processes, Redis (shared bucket)", 2, false},
		{"2 processes, in-process bucket (embedded mode)", 2, true},
	}
	for i, row := range rows {
		seeds := rig.seeds
		if row.embedded {
			seeds = nil
		}
		clients, err := rig.startSluice(ctx, row.processes, seeds, path, c.Workers)
		if err != nil {
			return rep, err
		}
		if rep.Machine.Sluice == "unknown" {
			rep.Machine.Sluice = sluiceVersion(ctx, clients[0])
		}
		res := GlobalLabRow{Setup: row.setup, Processes: row.processes, Embedded: row.embedded}
		for _, ch := range rig.children {
			res.Pids = append(res.Pids, ch.pid())
		}
		key := fmt.Sprintf("acme:%d:%d", stamp, i)
		ld := driveHot(ctx, clients, loadSpec{
			key: key, workers: c.Workers, pipeline: 1,
			duration: c.Duration, maxRequests: c.MaxRequests, limit: c.Limit,
		})
		rig.stopSluice()
		res.Allowed, res.Rejected, res.Errors = ld.admitted, ld.rejected, ld.errors
		res.AllowedPer = ld.admittedPerClient
		res.DecidedBy = ld.by
		if ld.firstErr != nil {
			res.FirstError = ld.firstErr.Error()
		}
		if !ld.first.IsZero() {
			res.Elapsed = ld.last.Sub(ld.first)
		}
		res.Expected = labBudget(c.Limit, c.Rate, res.Elapsed)
		rep.Rows = append(rep.Rows, res)
		rig.logf("[%d/%d] %s: allowed %d (%s per process) of expected %.0f (%.2f×), rejected %d, errors %d, decided_by %s, %v",
			i+1, len(rows), row.setup, res.Allowed, joinInts(res.AllowedPer), res.Expected, res.Ratio(), res.Rejected, res.Errors,
			formatCounts(res.DecidedBy), res.Elapsed.Round(time.Millisecond))
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if ld.wrongLimit > 0 {
			return rep, fmt.Errorf("lab global: %s: %d replies carry a limit other than %d", row.setup, ld.wrongLimit, c.Limit)
		}
	}
	rep.Elapsed = time.Since(began)
	return rep, nil
}

// Markdown renders the seed lab's table with the measured numbers.
func (r *GlobalLabReport) Markdown() string {
	c := r.Config
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# sluice lab global: is the limit global?\n\n")
	w("Machine: %s.\n\n", r.Machine)
	w("One tenant key, a token bucket of capacity %d refilled %d/s (`on_store_error: closed`). "+
		"Each sluice process gets %d goroutines, each sending one `RL.TAKE <key> 1` at a time, for %s per row (at most %s requests); "+
		"every row uses a fresh key, so its bucket starts full. The whole run took %s.\n\n",
		c.Limit, c.Rate, c.Workers, c.Duration, thousands(float64(c.MaxRequests)), r.Elapsed.Round(time.Second))
	w("| Setup | allowed (global) | rejected | expected (%d + %d × elapsed) | allowed ÷ expected | verdict |\n", c.Limit, c.Rate)
	w("|---|--:|--:|--:|--:|---|\n")
	for _, row := range r.Rows {
		w("| %s | %s | %s | %s | %s | %s |\n", row.Setup, thousands(float64(row.Allowed)), thousands(float64(row.Rejected)),
			thousands(row.Expected), fixed(row.Ratio(), 2), row.Verdict())
	}
	w("\n")
	w("- **expected** is what ONE shared bucket admits from full in the row's elapsed time (first request sent to last reply received). " +
		"The verdict is computed from allowed ÷ expected: 0.9–1.1 the cap holds, 1.5 and above an overshoot of that many buckets.\n")
	w("- The embedded row runs the same binary without `--cluster`: each process decides in its own memory, " +
		"and sluice logs a warning at start that limits are then per process.\n\n")
	w("| Setup | allowed per process | error replies | decided_by | elapsed | sluice pids |\n|---|--:|--:|---|--:|---|\n")
	for _, row := range r.Rows {
		errs := thousands(float64(row.Errors))
		if row.FirstError != "" {
			errs += " (first: " + cell(row.FirstError) + ")"
		}
		w("| %s | %s | %s | %s | %s | %v |\n", row.Setup, joinInts(row.AllowedPer), errs, formatCounts(row.DecidedBy),
			row.Elapsed.Round(time.Millisecond), row.Pids)
	}
	w("\nThe policy file:\n\n```yaml\n%s```\n", c.policyYAML())
	return b.String()
}
