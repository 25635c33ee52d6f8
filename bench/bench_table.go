package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
)

// Defaults of TableConfig.
const (
	DefaultTableRequests = 50_000
	DefaultTableRounds   = 2
	tableZipfKeyspace    = 2_000_000
	tableZipfS           = 1.1
)

// TableConfig says what RunTable measures: the rows of the README's bench
// table (issue 31's targets) for two sluice binaries, A B A B.
type TableConfig struct {
	// Binaries are the two sluice binaries started as `sluice serve`, in
	// turn: A (the old one) then B (the new one) in every round. The load
	// generators, the direct side and the checks are this process's, the
	// same for both.
	Binaries []string
	// Labels name the binaries in the table; nil means "A" and "B".
	Labels []string
	// Cluster are seeds of a running Redis Cluster; nil starts a 3+3 one
	// for the whole table and stops it at the end.
	Cluster []string
	// Requests is every run's, each side of each row (50,000).
	Requests int
	// Rounds is how often each binary runs every row (2: A B A B).
	Rounds int
	// Clients is the callers per side (50).
	Clients int
	// MarkdownPath, when set, receives the report.
	MarkdownPath string
	Now          func() time.Time
}

func (c *TableConfig) resolve() error {
	orDefault(&c.Requests, DefaultTableRequests)
	orDefault(&c.Rounds, DefaultTableRounds)
	orDefault(&c.Clients, DefaultClients)
	orNow(&c.Now)
	if len(c.Labels) == 0 {
		c.Labels = []string{"A", "B"}
	}
	var errs []error
	if len(c.Binaries) != 2 {
		errs = append(errs, fmt.Errorf("want two sluice binaries (old,new), got %d", len(c.Binaries)))
	}
	for _, b := range c.Binaries {
		if st, err := os.Stat(b); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			errs = append(errs, fmt.Errorf("binary %q is not an executable file", b))
		}
	}
	if len(c.Binaries) == 2 && len(c.Labels) != 2 {
		errs = append(errs, fmt.Errorf("%d labels for %d binaries", len(c.Labels), len(c.Binaries)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench table: %w", err)
	}
	return nil
}

// The rows of the table, in order.
var tableRows = []string{
	"uniform keys (redis-benchmark), P1",
	"uniform keys (redis-benchmark), P16",
	"Zipf tenants (2,000,000 keys, s = 1.1), P1",
	"Zipf tenants (2,000,000 keys, s = 1.1), P16",
	"abusers (1,000 logins over 5/min), P16",
	"one hot key (default lease), P16",
}

// TableCell is one row measured once for one binary: sluice's side and
// the direct side of the same invocation.
type TableCell struct {
	Row       string
	Round     int
	Binary    int // index in TableConfig.Binaries
	SluiceRPS float64
	DirectRPS float64
	// RedisCPU is µs of the primaries' CPU per decision, each side;
	// AllRedisCPU every redis-server's (primaries and replicas), the
	// redis-benchmark rows only (NaN for the others).
	SluiceRedisCPU, DirectRedisCPU       float64
	SluiceAllRedisCPU, DirectAllRedisCPU float64
	// SluiceCPU is µs of the sluice process's CPU per decision.
	SluiceCPU float64
	// ByStore, ByLease and ByDenyCache are the share (0…1) of sluice's
	// decisions by each path, the Go generator's rows only (NaN for the
	// redis-benchmark rows, where every decision is the store's: Run
	// checks it).
	ByStore, ByLease, ByDenyCache float64
}

// Ratio is sluice's req/s over direct's in the same invocation.
func (c TableCell) Ratio() float64 { return ratio(c.SluiceRPS, c.DirectRPS) }

// CPURatio is the primaries' CPU per decision, sluice ÷ direct.
func (c TableCell) CPURatio() float64 { return ratio(c.SluiceRedisCPU, c.DirectRedisCPU) }

// AllCPURatio is every redis-server's CPU per decision, sluice ÷ direct.
func (c TableCell) AllCPURatio() float64 { return ratio(c.SluiceAllRedisCPU, c.DirectAllRedisCPU) }

// TableSide is one binary's medians of one row over its rounds.
type TableSide struct {
	SluiceRPS, DirectRPS, Ratio, CPURatio, AllCPURatio, SluiceCPU float64
}

// TableRow is one row, both binaries.
type TableRow struct {
	Row   string
	Sides []TableSide
}

// TableReport is RunTable's result.
type TableReport struct {
	Config  TableConfig
	Machine Machine
	Cells   []TableCell
	Rows    []TableRow
	Elapsed time.Duration
}

// RunTable runs, Rounds times, for each binary in turn (A B A B), the
// rows of the README's bench table: uniform keys by redis-benchmark at
// P1 and P16 (Run), Zipf tenants at P1 and P16, abusers and one hot key
// at P16 (RunWorkloads), each invocation starting the binary as its
// sluice and running its own direct side, with every check those make.
// It prints the table of medians to stdout and MarkdownPath.
func RunTable(ctx context.Context, cfg TableConfig, stdout, progress io.Writer) (*TableReport, error) {
	began := time.Now()
	if err := cfg.resolve(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	log := func(format string, args ...any) { fmt.Fprintf(progress, "bench table: "+format+"\n", args...) }
	seeds := cfg.Cluster
	if len(seeds) == 0 {
		log("starting a Redis Cluster (3 primaries, 3 replicas) for the whole table")
		rc, err := localredis.Start(ctx, localredis.Config{Log: linePrefix{progress, "bench table: "}})
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := rc.Stop(); err != nil {
				log("stopping the cluster: %v", err)
			}
		}()
		seeds = rc.Addrs()
	}
	rep := &TableReport{Config: cfg}
	n := 0
	for round := 1; round <= cfg.Rounds; round++ {
		for i, bin := range cfg.Binaries {
			n++
			log("[%d/%d] round %d, %s (%s)", n, cfg.Rounds*len(cfg.Binaries), round, cfg.Labels[i], bin)
			cells, m, err := tableRound(ctx, cfg, seeds, bin, progress)
			if err != nil {
				return rep, fmt.Errorf("bench table: round %d, %s (%s): %w", round, cfg.Labels[i], bin, err)
			}
			for _, c := range cells {
				c.Round, c.Binary = round, i
				rep.Cells = append(rep.Cells, c)
				log("round %d %s %-45s sluice ÷ direct %s, Redis CPU ÷ direct %s, sluice CPU %s µs/decision", round, cfg.Labels[i], c.Row,
					fixed(c.Ratio(), 2), fixed(c.CPURatio(), 2), fixed(c.SluiceCPU, 1))
			}
			if i == len(cfg.Binaries)-1 {
				rep.Machine = m
			}
		}
	}
	rep.aggregate()
	rep.Elapsed = time.Since(began)
	md := rep.Markdown()
	fmt.Fprint(stdout, md)
	if cfg.MarkdownPath == "" {
		return rep, nil
	}
	if err := os.MkdirAll(filepath.Dir(cfg.MarkdownPath), 0o755); err != nil {
		return rep, err
	}
	return rep, os.WriteFile(cfg.MarkdownPath, []byte(md), 0o644)
}

// tableRound is one binary's every row, once.
func tableRound(ctx context.Context, cfg TableConfig, seeds []string, bin string, progress io.Writer) ([]TableCell, Machine, error) {
	var cells []TableCell
	br, err := Run(ctx, Config{Cluster: seeds, Binary: bin, NoEmbedded: true, Scenarios: []Scenario{Uniform}, Pipelines: []int{1, 16},
		Requests: cfg.Requests, Rounds: 1, Warmup: max(cfg.Requests/10, 1), Clients: cfg.Clients}, io.Discard, progress)
	if err != nil {
		return nil, Machine{}, err
	}
	for i, r := range br.Rows {
		cells = append(cells, TableCell{Row: tableRows[i], SluiceRPS: r.Sluice.RPS, DirectRPS: r.Direct.RPS,
			SluiceRedisCPU: r.Sluice.PrimaryCPU, DirectRedisCPU: r.Direct.PrimaryCPU,
			SluiceAllRedisCPU: r.Sluice.RedisCPU, DirectAllRedisCPU: r.Direct.RedisCPU, SluiceCPU: r.Sluice.SluiceCPU,
			ByStore: math.NaN(), ByLease: math.NaN(), ByDenyCache: math.NaN()})
	}
	var m Machine
	for _, w := range []struct {
		cfg  WorkloadConfig
		rows []string
	}{
		{WorkloadConfig{Keys: KeyDist{Zipf: tableZipfS}, Workloads: []string{WorkloadTenants}, Keyspace: tableZipfKeyspace, Depths: []int{1, 16}}, tableRows[2:4]},
		{WorkloadConfig{Workloads: []string{WorkloadAbuse, WorkloadHot}, Depths: []int{16}}, tableRows[4:6]},
	} {
		wc := w.cfg
		wc.Binary, wc.Cluster, wc.Requests, wc.Rounds, wc.Clients = bin, seeds, cfg.Requests, 1, cfg.Clients
		wr, err := RunWorkloads(ctx, wc, io.Discard, progress)
		if err != nil {
			return nil, Machine{}, err
		}
		m = wr.Machine
		for i, r := range wr.Rows {
			c := TableCell{Row: w.rows[i], SluiceRPS: r.Sluice.RPS, DirectRPS: r.Direct.RPS,
				SluiceRedisCPU: r.Sluice.RedisCPU, DirectRedisCPU: r.Direct.RedisCPU, SluiceAllRedisCPU: math.NaN(), DirectAllRedisCPU: math.NaN(),
				SluiceCPU: r.Sluice.SluiceCPU}
			for _, run := range wr.Runs {
				if run.Workload == r.Workload && run.Depth == r.Depth && run.Side == Sluice {
					n := float64(run.Requests)
					c.ByStore, c.ByLease, c.ByDenyCache = float64(run.ByStore)/n, float64(run.ByLease)/n, float64(run.ByDenyCache)/n
				}
			}
			cells = append(cells, c)
		}
	}
	return cells, m, nil
}

// aggregate fills Rows from Cells: per row and binary, the medians over
// the rounds.
func (rep *TableReport) aggregate() {
	rep.Rows = nil
	for _, name := range tableRows {
		row := TableRow{Row: name}
		for b := range rep.Config.Binaries {
			var rps, direct, rat, cpu, all, own []float64
			for _, c := range rep.Cells {
				if c.Row == name && c.Binary == b {
					rps, direct, rat = append(rps, c.SluiceRPS), append(direct, c.DirectRPS), append(rat, c.Ratio())
					cpu, all, own = append(cpu, c.CPURatio()), append(all, c.AllCPURatio()), append(own, c.SluiceCPU)
				}
			}
			row.Sides = append(row.Sides, TableSide{SluiceRPS: Median(rps), DirectRPS: Median(direct), Ratio: Median(rat),
				CPURatio: Median(cpu), AllCPURatio: Median(all), SluiceCPU: Median(own)})
		}
		rep.Rows = append(rep.Rows, row)
	}
}

// Markdown is the report.
func (rep *TableReport) Markdown() string { return render("table", rep) }

// Pair is "a → b" of one column's figures of the two binaries.
func (r TableRow) Pair(col string, prec int) string {
	parts := make([]string, len(r.Sides))
	for i, s := range r.Sides {
		var v float64
		switch col {
		case "ratio":
			v = s.Ratio
		case "cpu":
			v = s.CPURatio
		case "all":
			v = s.AllCPURatio
		case "own":
			v = s.SluiceCPU
		case "rps":
			parts[i] = thousands(s.SluiceRPS)
			continue
		case "direct":
			parts[i] = thousands(s.DirectRPS)
			continue
		}
		parts[i] = fixed(v, prec)
	}
	return strings.Join(parts, " → ")
}

// Share is a cell's decided-by shares, "store 74 % lease 26 %"; "" for the
// redis-benchmark rows.
func (c TableCell) Share() string {
	if math.IsNaN(c.ByStore) {
		return "store 100 % (checked)"
	}
	var parts []string
	for _, p := range []struct {
		name string
		v    float64
	}{{"store", c.ByStore}, {"lease", c.ByLease}, {"deny-cache", c.ByDenyCache}} {
		if p.v > 0 {
			parts = append(parts, fmt.Sprintf("%s %s %%", p.name, fixed(100*p.v, 1)))
		}
	}
	return strings.Join(parts, ", ")
}

// HasAll reports whether the row has every redis-server's CPU (the
// redis-benchmark rows).
func (r TableRow) HasAll() bool { return len(r.Sides) > 0 && !math.IsNaN(r.Sides[0].AllCPURatio) }

// Label is the name of binary i.
func (rep *TableReport) Label(i int) string { return rep.Config.Labels[i] }
