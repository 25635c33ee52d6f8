package bench

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

func TestParseKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want KeyDist
		ok   bool
	}{
		{"uniform", KeyDist{}, true},
		{"zipf:1.1", KeyDist{Zipf: 1.1}, true},
		{"zipf:2", KeyDist{Zipf: 2}, true},
		{"zipf:1", KeyDist{}, false},
		{"zipf:0.9", KeyDist{}, false},
		{"zipf:", KeyDist{}, false},
		{"zipf:NaN", KeyDist{}, false},
		{"hot", KeyDist{}, false},
	} {
		got, err := ParseKeys(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseKeys(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("ParseKeys(%q).String() = %q", tc.in, got.String())
		}
	}
}

// The key sequences are seeded: the same for the same seed and caller,
// whichever side draws them; Zipf's are skewed to key 0.
func TestKeySourceStreams(t *testing.T) {
	t.Parallel()
	for _, zipf := range []float64{0, 1.1} {
		k := keySource{keyspace: 1000, zipfS: zipf, seed: 7}
		a, b, other := k.stream(3), k.stream(3), k.stream(4)
		counts := make([]int, k.keyspace)
		same, differ := true, false
		for range 10_000 {
			x, y, z := a(), b(), other()
			if x < 0 || x >= k.keyspace {
				t.Fatalf("zipf %g: key %d outside [0, %d)", zipf, x, k.keyspace)
			}
			same = same && x == y
			differ = differ || x != z
			counts[x]++
		}
		if !same || !differ {
			t.Errorf("zipf %g: same seed and caller alike %v, another caller different %v; want both", zipf, same, differ)
		}
		if zipf > 1 && (counts[0] < counts[1] || counts[0] < 10*counts[999]+10) {
			t.Errorf("zipf %g: key 0 drawn %d times, key 1 %d, key 999 %d: not skewed to key 0", zipf, counts[0], counts[1], counts[999])
		}
	}
}

// readReply reads what appendCommand writes and the reply shapes of
// RL.TAKE and EVALSHA.
func TestReadReply(t *testing.T) {
	t.Parallel()
	in := string(appendCommand(nil, "RL.TAKE", "k", "1")) +
		"*6\r\n:1\r\n:5\r\n:4\r\n:-1\r\n:12000\r\n$5\r\nstore\r\n" +
		"-ERR nope\r\n+OK\r\n$-1\r\n"
	r := bufio.NewReader(strings.NewReader(in))
	cmd, err := readReply(r)
	if err != nil || len(cmd.([]any)) != 3 || cmd.([]any)[0] != "RL.TAKE" {
		t.Fatalf("command: %v, %v", cmd, err)
	}
	v, err := readReply(r)
	if err != nil {
		t.Fatal(err)
	}
	var res genResult
	res.by = map[string]int64{}
	if err := res.count(v); err != nil || res.admitted != 1 || res.by["store"] != 1 {
		t.Errorf("RL.TAKE reply %v counted %+v, %v", v, res, err)
	}
	if _, err := readReply(r); err == nil || !strings.Contains(err.Error(), "ERR nope") {
		t.Errorf("error reply: %v", err)
	}
	if v, err := readReply(r); v != "OK" || err != nil {
		t.Errorf("simple string: %v, %v", v, err)
	}
	if v, err := readReply(r); v != nil || err != nil {
		t.Errorf("nil bulk string: %v, %v", v, err)
	}
	if _, err := readReply(r); err != io.EOF {
		t.Errorf("at the end: %v, want EOF", err)
	}
	if err := res.count([]any{int64(2), int64(1), int64(1), int64(1), int64(1)}); err == nil {
		t.Error("allowed 2 counted")
	}
}

// A command line the workloads refuse fails before anything starts.
func TestWorkloadFlagsRefused(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--keys", "zipf:0.9"},
		{"--keys", "uniform", "--svg", "x.svg"},
		{"--workload", "abuse", "--sluice", "127.0.0.1:1", "--cluster", "127.0.0.1:2"},
		{"--workload", "flood"},
		{"--keys", "uniform", "--pipelines", "0"},
	} {
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		run := BenchFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err := run(ctx, io.Discard, io.Discard)
		cancel()
		if err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// sampleWorkloadReport has two rounds of two workloads at one depth.
func sampleWorkloadReport() *WorkloadReport {
	rep := &WorkloadReport{Config: WorkloadConfig{Keys: KeyDist{Zipf: 1.1}, Workloads: []string{WorkloadTenants, WorkloadAbuse},
		Clients: 50, Depths: []int{16}, Requests: 200_000, Keyspace: 2_000_000, Logins: 1_000, Rounds: 2},
		Machine: goldenMachine, Elapsed: 75 * time.Second, Policy: WorkloadPolicy}
	for round := 1; round <= 2; round++ {
		for _, w := range rep.Config.Workloads {
			for _, s := range []Side{Sluice, Direct} {
				r := WorkloadRun{Round: round, Workload: w, Depth: 16, Side: s, Keys: "k", Requests: 200_000, Admitted: 200_000, Decisions: 200_000,
					ScriptCalls: 200_000, Elapsed: 2 * time.Second, RPS: 100_000, P50: 0.5, P99: 2.5, RedisCPU: 10, SluiceCPU: math.NaN()}
				if w == WorkloadAbuse {
					r.Admitted, r.Refused = 5_000, 195_000
				}
				if s == Sluice {
					r.ByStore, r.ScriptCalls, r.RPS, r.RedisCPU = 200_000, 20_000, 130_000+float64(round)*10_000, 6+float64(round)
					r.SluiceCPU = 2 + float64(round)
				}
				rep.Runs = append(rep.Runs, r)
			}
		}
	}
	rep.aggregate()
	return rep
}

func TestWorkloadAggregate(t *testing.T) {
	t.Parallel()
	rep := sampleWorkloadReport()
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rep.Rows))
	}
	r := rep.Rows[0]
	if r.Sluice.RPS != 145_000 || r.Sluice.MinRPS != 140_000 || r.Sluice.MaxRPS != 150_000 || r.Direct.RPS != 100_000 {
		t.Errorf("row %+v", r)
	}
	if got, want := r.Ratio(), 1.45; math.Abs(got-want) > 1e-9 {
		t.Errorf("ratio %v, want %v", got, want)
	}
	if got, want := r.CPURatio(), 0.75; math.Abs(got-want) > 1e-9 {
		t.Errorf("CPU ratio %v, want %v", got, want)
	}
	if got := rep.Rows[1].Sluice.AdmittedShare; got != 2.5 {
		t.Errorf("abuse admitted %v%%, want 2.5", got)
	}
	if got := r.Sluice.SluiceCPU; got != 3.5 {
		t.Errorf("sluice CPU %v µs/decision, want the median 3.5", got)
	}
	if got := r.Direct.SluiceCPU; !math.IsNaN(got) {
		t.Errorf("direct side's sluice CPU %v, want NaN (n/a)", got)
	}
	if got := r.Sluice.PerCall; got != 10 {
		t.Errorf("decisions per call %v, want 10", got)
	}
}

// The workloads end to end on a real cluster the test starts, at small
// counts: a row per workload and depth, every run's decisions counted
// equal to the requests sent on both sides, the ratios the measured
// figures', and the abuse workload refused alike on both sides. Nothing
// here is about speed.
//
// It runs twice on one cluster, as scripts/bench-table.sh runs two
// binaries in turn: the second invocation's abuse keys must be its own
// (fresh buckets, the first 5 of each admitted again), not the first's,
// which are spent for a minute.
func TestRunWorkloadsSmoke(t *testing.T) {
	requireRedisBinaries(t)
	c := redistest.NewCluster(t, localredis.Config{})
	bin := buildSluice(t)
	cfg := WorkloadConfig{Binary: bin, Cluster: c.Addrs(), Keys: KeyDist{Zipf: 1.1}, Workloads: []string{WorkloadTenants, WorkloadAbuse, WorkloadHot},
		Clients: 4, Depths: []int{1, 4}, Requests: 400, Keyspace: 1000, Logins: 20, Rounds: 2, Warmup: 100}
	var out bytes.Buffer
	rep, err := RunWorkloads(labCtx(t), cfg, &out, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", out.String())
	if len(rep.Runs) != 3*2*2*2 || len(rep.Rows) != 3*2 {
		t.Fatalf("%d runs and %d rows, want 24 and 6", len(rep.Runs), len(rep.Rows))
	}
	for _, r := range rep.Runs {
		if r.Requests != 400 || r.Decisions != 400 || r.Admitted+r.Refused != 400 || !(r.RPS > 0) || !(r.RedisCPU >= 0) {
			t.Errorf("run %+v: want 400 requests, 400 decisions, a rate and Redis CPU", r)
		}
		if r.Side == Direct && r.ScriptCalls != 400 || r.Side == Sluice && (r.ByStore+r.ByDenyCache+r.ByLease != 400 || r.ScriptCalls < 1 || r.ScriptCalls > 400) {
			t.Errorf("run %+v: script calls or store decisions off", r)
		}
		if r.Side == Sluice && !(r.SluiceCPU >= 0) || r.Side == Direct && !math.IsNaN(r.SluiceCPU) {
			t.Errorf("run %d %s %s P%d: sluice CPU %v µs/decision: want a figure through sluice, n/a direct", r.Round, r.Workload, r.Side, r.Depth, r.SluiceCPU)
		}
		if r.Workload == WorkloadHot && r.Admitted != 400 {
			t.Errorf("hot run %+v: want every request admitted", r)
		}
	}
	if !strings.Contains(out.String(), "| one hot key (default lease), 4 in flight per caller | ") {
		t.Errorf("no hot row in the report")
	}
	for _, row := range rep.Rows {
		if row.Ratio() != row.Sluice.RPS/row.Direct.RPS || row.CPURatio() != row.Sluice.RedisCPU/row.Direct.RedisCPU {
			t.Errorf("row %+v: ratios not from the medians", row)
		}
		if !strings.Contains(out.String(), "| "+row.Label+" | "+thousands(row.Sluice.RPS)+" | "+thousands(row.Direct.RPS)+" | "+fixed(row.Ratio(), 2)+" |") {
			t.Errorf("no row %q with its figures in the report", row.Label)
		}
	}
	checkAbuseAlike(t, rep)

	again := cfg
	again.Workloads, again.Depths, again.Rounds, again.Warmup = []string{WorkloadAbuse}, []int{4}, 1, -1
	rep2, err := RunWorkloads(labCtx(t), again, io.Discard, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	checkAbuseAlike(t, rep2)
}

// checkAbuseAlike checks that the abuse runs admitted what 5 a minute
// admits of their key sequence, which both sides draw alike: the first 5
// of each key (a run that took under 12 s, the time one token takes to
// refill).
func checkAbuseAlike(t *testing.T, rep *WorkloadReport) {
	t.Helper()
	c := rep.Config
	for _, r := range rep.Runs {
		if r.Workload != WorkloadAbuse {
			continue
		}
		hits := map[int]int{}
		k := keySource{keyspace: c.Logins, seed: c.Seed}
		for w := range c.Clients {
			next := k.stream(w)
			for range c.Requests / c.Clients {
				hits[next()]++
			}
		}
		var want int64
		for _, h := range hits {
			want += int64(min(h, abuseLimitPerMinute))
		}
		if r.Elapsed < 12*time.Second && r.Admitted != want {
			t.Errorf("abuse run %d %s P%d: admitted %d, want %d (5 of each key's %s hits)", r.Round, r.Side, r.Depth, r.Admitted, want, strconv.Itoa(len(hits)))
		}
		if r.Refused == 0 {
			t.Errorf("abuse run %+v refused nothing", r)
		}
	}
}
