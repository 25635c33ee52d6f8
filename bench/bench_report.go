package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Side is what redis-benchmark talks to.
type Side string

// The sides.
const (
	Sluice Side = "sluice" // RL.TAKE through sluice in front of the cluster
	// Embedded is RL.TAKE through a second sluice process, the same binary
	// with the same policy file and no store (embedded mode): the front
	// end's ceiling, so that the sluice side's CPU minus this side's is
	// what the store path adds.
	Embedded Side = "embedded"
	Direct   Side = "direct" // EVALSHA of the same script on the owning shard
)

// sides are the sides in the order each cell runs them.
var sides = []Side{Sluice, Embedded, Direct}

// Trial is one redis-benchmark run. CPU figures are µs of CPU time per
// request (decision); NaN when they could not be measured.
type Trial struct {
	Round    int
	Scenario Scenario
	Pipeline int
	Side     Side
	Requests int
	Command  string // the redis-benchmark command line
	Result
	Elapsed time.Duration
	// RedisCPU is the CPU of every redis-server of the cluster, primaries
	// and replicas, per request; PrimaryCPU the primaries' share of it.
	RedisCPU, PrimaryCPU float64
	// PerCall is the decisions per script call sluice sent to the store
	// (its INFO node_… lines); NaN on the other sides (1 on the direct
	// side, none embedded).
	PerCall float64
	// PerPipeline is the commands per pipeline sluice sent to the store
	// (INFO node_… lines: commands ÷ pipelines); NaN on the other sides.
	PerPipeline float64
	// SluiceCPU is the CPU of the sluice process per request (of the
	// embedded one on the embedded side); NaN on the direct side.
	SluiceCPU float64
	// ScriptCalls are the script calls each primary ran during the run,
	// in Report.Primaries order.
	ScriptCalls []int64
	// Errors counts error replies and fallback answers; a run with any
	// fails Run.
	Errors int64
	// ByLease is the requests of a sluice or embedded run decided by a
	// leased token (INFO decided_by_lease); 0 on the direct side.
	ByLease int64
}

// Summary is the median over rounds of one side of one Row.
type Summary struct {
	Requests            int
	RPS, P50, P99       float64
	RedisCPU, SluiceCPU float64 // µs per decision; NaN unknown
	PrimaryCPU          float64 // the primaries' part of RedisCPU
	PerCall             float64 // decisions per script call; NaN unknown
	PerPipeline         float64 // commands per store pipeline; NaN unknown
}

// Row is one scenario at one pipeline depth, every side; a side that did
// not run is all NaN.
type Row struct {
	Scenario                 Scenario
	Pipeline                 int
	Sluice, Embedded, Direct Summary
}

// Ratio is sluice req/s ÷ direct req/s.
func (r Row) Ratio() float64 { return ratio(r.Sluice.RPS, r.Direct.RPS) }

// StoreCPU is the sluice CPU µs per decision that the store path adds to
// the front end: the sluice side's minus the embedded side's.
func (r Row) StoreCPU() float64 { return r.Sluice.SluiceCPU - r.Embedded.SluiceCPU }

// cpuSplit is "all (primaries + replicas)" of a summary's Redis CPU.
func cpuSplit(s Summary) string {
	if math.IsNaN(s.PrimaryCPU) || math.IsNaN(s.RedisCPU) {
		return fixed(s.RedisCPU, 1)
	}
	return fmt.Sprintf("%s (%s + %s)", fixed(s.RedisCPU, 1), fixed(s.PrimaryCPU, 1), fixed(s.RedisCPU-s.PrimaryCPU, 1))
}

// CPURatio is Redis CPU per decision, sluice ÷ direct.
func (r Row) CPURatio() float64 { return ratio(r.Sluice.RedisCPU, r.Direct.RedisCPU) }

// Machine describes where a benchmark ran.
type Machine struct {
	CPUs      int    // runtime.NumCPU
	Nproc     string // output of nproc
	CPUModel  string
	Go, OS    string
	Sluice    string // sluice_version of the sluice measured
	Redis     string // redis_version of the cluster
	Benchmark string // redis-benchmark --version
	Date      time.Time
}

// String is the machine line of the report.
func (m Machine) String() string {
	cpu := fmt.Sprintf("%d CPUs (nproc %s)", m.CPUs, m.Nproc)
	if m.CPUModel != "" {
		cpu += ", " + m.CPUModel
	}
	return fmt.Sprintf("%s; %s; %s; sluice %s; redis-server %s; %s; %s",
		cpu, m.OS, m.Go, m.Sluice, m.Redis, m.Benchmark, m.Date.UTC().Format("2006-01-02 15:04 MST"))
}

// Report is what Run measured.
type Report struct {
	Machine   Machine
	Clients   int
	Keyspace  int
	Rounds    int
	Threads   int
	Primaries []string // addresses of the primaries
	RedisCPU  bool     // the CPU of every redis-server was readable
	SluiceCPU bool     // the CPU of sluice was readable
	Runs      []Trial
	Rows      []Row // from Runs, by aggregate
	Elapsed   time.Duration
}

// aggregate fills Rows with the medians of Runs, in the order the runs
// first appear.
func (r *Report) aggregate() {
	r.Rows = nil
	type cell struct {
		sc Scenario
		p  int
	}
	var order []cell
	runs := map[cell]map[Side][]Trial{}
	for _, run := range r.Runs {
		c := cell{run.Scenario, run.Pipeline}
		if runs[c] == nil {
			runs[c] = map[Side][]Trial{}
			order = append(order, c)
		}
		runs[c][run.Side] = append(runs[c][run.Side], run)
	}
	for _, c := range order {
		r.Rows = append(r.Rows, Row{Scenario: c.sc, Pipeline: c.p,
			Sluice: summarize(runs[c][Sluice]), Embedded: summarize(runs[c][Embedded]), Direct: summarize(runs[c][Direct])})
	}
}

func summarize(runs []Trial) Summary {
	if len(runs) == 0 {
		nan := math.NaN()
		return Summary{RPS: nan, P50: nan, P99: nan, RedisCPU: nan, SluiceCPU: nan, PrimaryCPU: nan, PerCall: nan, PerPipeline: nan}
	}
	pick := func(f func(Trial) float64) float64 {
		v := make([]float64, len(runs))
		for i, run := range runs {
			v[i] = f(run)
		}
		return Median(v)
	}
	return Summary{
		Requests:    runs[0].Requests,
		RPS:         pick(func(r Trial) float64 { return r.RPS }),
		P50:         pick(func(r Trial) float64 { return r.P50 }),
		P99:         pick(func(r Trial) float64 { return r.P99 }),
		RedisCPU:    pick(func(r Trial) float64 { return r.RedisCPU }),
		PrimaryCPU:  pick(func(r Trial) float64 { return r.PrimaryCPU }),
		PerCall:     pick(func(r Trial) float64 { return r.PerCall }),
		PerPipeline: pick(func(r Trial) float64 { return r.PerPipeline }),
		SluiceCPU:   pick(func(r Trial) float64 { return r.SluiceCPU }),
	}
}

// Median is the middle value of v, the mean of the two middle ones for an
// even count; NaN if v is empty or holds a NaN.
func Median(v []float64) float64 {
	if len(v) == 0 || slices.ContainsFunc(v, math.IsNaN) {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Markdown renders the report: the summary table, what its columns mean,
// the command lines and every run.
func (r *Report) Markdown() string { return render("bench", r) }

// SideOrder is the order the sides ran in each cell: "sluice, embedded,
// then direct".
func (r *Report) SideOrder() string {
	var ran []string
	for _, side := range sides {
		if slices.ContainsFunc(r.Runs, func(t Trial) bool { return t.Side == side }) {
			ran = append(ran, string(side))
		}
	}
	if len(ran) < 2 {
		return strings.Join(ran, "")
	}
	return strings.Join(ran[:len(ran)-1], ", ") + " then " + ran[len(ran)-1]
}

// hasScenario says whether any run is of scenario sc.
func (r *Report) hasScenario(sc Scenario) bool {
	return slices.ContainsFunc(r.Runs, func(t Trial) bool { return t.Scenario == sc })
}

// HasLease reports whether the hot-lease scenario ran.
func (r *Report) HasLease() bool { return r.hasScenario(HotLease) }

// LeaseKey is the sluice side's key of the hot-lease scenario.
func (r *Report) LeaseKey() string { return HotLeaseKey }

// RunCommand is the command line of one scenario, depth and side (ID:
// "uniform P1 sluice").
type RunCommand struct{ ID, Command string }

// Commands are the command lines of the runs, each once, in the order
// they first ran.
func (r *Report) Commands() []RunCommand {
	var out []RunCommand
	seen := map[string]bool{}
	for _, run := range r.Runs {
		id := fmt.Sprintf("%s P%d %s", run.Scenario, run.Pipeline, run.Side)
		if !seen[id] {
			seen[id] = true
			out = append(out, RunCommand{ID: id, Command: run.Command})
		}
	}
	return out
}

// LeaseShares lists, per hot-lease sluice run, the share of requests
// decided by lease: "P16 round 1: 97.1 %, …".
func (r *Report) LeaseShares() string {
	var parts []string
	for _, run := range r.Runs {
		if run.Scenario == HotLease && run.Side == Sluice {
			parts = append(parts, fmt.Sprintf("P%d round %d: %s of %s (%s %%)", run.Pipeline, run.Round,
				thousands(float64(run.ByLease)), thousands(float64(run.Requests)), fixed(100*ratio(float64(run.ByLease), float64(run.Requests)), 1)))
		}
	}
	return strings.Join(parts, ", ")
}

// write prints the markdown to stdout and writes the files that are set.
func (r *Report) write(stdout io.Writer, mdPath, svgPath string) error {
	md := r.Markdown()
	if _, err := io.WriteString(stdout, md); err != nil {
		return err
	}
	for _, f := range []struct{ path, text string }{{mdPath, md}, {svgPath, r.SVG()}} {
		if f.path == "" {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if err := os.WriteFile(f.path, []byte(f.text), 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	return nil
}
