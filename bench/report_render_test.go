package bench

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata/")

// goldenMachine is a fixed machine line for the golden reports.
var goldenMachine = Machine{CPUs: 2, Nproc: "2", CPUModel: "Test CPU", Go: "go1.x", OS: "linux/amd64",
	Sluice: "0.1.0-test", Redis: "7.0.15", Benchmark: "go-redis", Date: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)}

// goldenReports are one report of each lab, with every kind of cell: a
// row with error replies and rows without.
func goldenReports(t *testing.T) map[string]interface{ Markdown() string } {
	t.Helper()
	run := LabRun{Machine: goldenMachine, Elapsed: 61 * time.Second}
	global := &GlobalLabReport{Config: GlobalLabConfig{}, LabRun: run, Rows: []GlobalLabRow{
		{Setup: "1 process, Redis (cluster)", Processes: 1, Allowed: 599, Rejected: 246_439, AllowedPer: []int64{599},
			DecidedBy: map[string]int64{"store": 247_038}, Elapsed: 10 * time.Second, Expected: 600, Pids: []int{11}},
		{Setup: "2 processes, in-process bucket (embedded mode)", Processes: 2, Embedded: true, Allowed: 1198, Rejected: 428_622,
			Errors: 3, FirstError: "ERR a | b", AllowedPer: []int64{599, 599}, DecidedBy: map[string]int64{"embedded": 429_820},
			Elapsed: 10*time.Second + 3*time.Millisecond, Expected: 600.15, Pids: []int{12, 13}},
	}}
	partition := &PartitionLabReport{Config: PartitionLabConfig{}, LabRun: run, Owner: "127.0.0.1:7001", Paused: 3 * time.Second,
		Pids: []int{21, 22}, Rows: []PartitionLabRow{
			{Mode: "open", Key: "open:{acme}", Allowed: 45_486, DecidedBy: map[string]int64{"fallback-open": 45_486},
				Slowest: 55400 * time.Microsecond, Elapsed: 3 * time.Second, Cap: 250, Share: 250, Strict: 219 * time.Millisecond},
			{Mode: "local", Key: "local:{acme}", Allowed: 246, Rejected: 44_858, Errors: 2, FirstError: "ERR boom",
				DecidedBy: map[string]int64{"fallback-local": 45_104}, Slowest: 57 * time.Millisecond, Elapsed: 3 * time.Second,
				Cap: 250, Share: 250, Strict: 219600 * time.Microsecond},
		}}
	restart := &RestartLabReport{Config: RestartLabConfig{}, LabRun: run, Key: "acme", Pids: []int{31, 32}, Rows: []RestartLabRow{
		{Event: "SCRIPT FLUSH on the owning primary", Requests: 17_595, Allowed: 100, DecidedBy: map[string]int64{"store": 17_595},
			Slowest: 6178 * time.Microsecond, NoScript: 1, Evals: 1, Strict: 2955 * time.Microsecond, Note: "the script cache emptied | kept serving"},
		{Event: "primary SIGKILLed, replica promoted (cluster-node-timeout 1s)", Requests: 104_951, Errors: 1, FirstError: "EOF",
			DecidedBy: map[string]int64{"fallback-local": 104_845, "store": 106}, Slowest: 101900 * time.Microsecond,
			Strict: 2411300 * time.Microsecond, Note: "127.0.0.1:14283 promoted 1.908s after the kill"},
	}}
	latency := &LatencyLabReport{Config: LatencyLabConfig{}, LabRun: run, Owner: "127.0.0.1:7002", Rows: []LatencyLabRow{
		{Path: "in-process Go decision (local.Store.Do)", Note: "no I/O", Samples: 20_000, P50: 0.00029, P99: 0.00036, Max: 0.02, Allowed: 12,
			Want: "embedded", DecidedBy: map[string]int64{"embedded": 20_000}},
		{Path: "RL.TAKE → sluice → Redis Cluster", Note: "two hops", Samples: 20_000, P50: 0.105, P99: 0.236, Max: 12.5, Allowed: 10,
			Want: "store", DecidedBy: map[string]int64{"deny-cache": 19_941, "store": 59}},
	}}
	hot := &HotLabReport{Config: HotLabConfig{}, LabRun: run, Key: HotLabKey, Owner: "127.0.0.1:7001",
		Primaries: []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"}, Arms: []HotLabResult{
			{Mode: LabStrict, Replies: 400_000, PerInstance: []int64{200_000, 200_000}, Admitted: 3500, Rejected: 396_490, Errors: 10,
				FirstError: "ERR x | y", DecidedBy: map[string]int64{"store": 399_990}, Elapsed: 5 * time.Second, Budget: 3500,
				P50: 1.5, P99: 4.25, ScriptCalls: []int64{0, 400_000, 0}, Pids: []int{41, 42}},
			{Mode: LabLease, Replies: 500_000, PerInstance: []int64{250_000, 250_000}, Admitted: 3400, Rejected: 496_600,
				DecidedBy: map[string]int64{"lease": 490_000, "store": 10_000}, Elapsed: 5 * time.Second, Budget: 3500,
				P50: 1.5, P99: 4.25, ScriptCalls: []int64{0, 1200, 0}, Pids: []int{43, 44}},
		}}
	for _, rep := range []Experiment{global, partition, restart, latency, hot} {
		c := rep.config()
		if err := c.resolve(); err != nil {
			t.Fatal(err)
		}
		rep.frame().Policy = c.rig().policy
	}
	return map[string]interface{ Markdown() string }{
		"global": global, "partition": partition, "restart": restart, "latency": latency, "hot": hot,
	}
}

// The labs' reports, byte for byte: a change of wording or of a table
// shows here first (go test -run TestLabMarkdownGolden -update rewrites
// them).
func TestLabMarkdownGolden(t *testing.T) {
	t.Parallel()
	for name, rep := range goldenReports(t) {
		path := filepath.Join("testdata", "lab-"+name+".golden.md")
		got := rep.Markdown()
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("%s report differs from %s:\n--- got\n%s\n--- want\n%s", name, path, got, want)
		}
	}
}

// otherReports are the reports of sluice-lab bench, bench --front, bench --keys and the
// soak, which do not go through RunLab, each with every kind of cell.
func otherReports() map[string]interface{ Markdown() string } {
	bench := sampleReport()
	lease := sampleReport()
	lease.RedisCPU, lease.SluiceCPU = false, false
	for _, tr := range lease.Runs[:6] {
		tr.Scenario, tr.ByLease = HotLease, 190_000
		lease.Runs = append(lease.Runs, tr)
	}
	lease.Rows = nil
	lease.aggregate()
	fronts := &FrontReport{Config: FrontConfig{Clients: 50, Requests: 200_000, Keyspace: 1_000_000}, Machine: goldenMachine,
		Direct: FrontRow{Door: "direct EVALSHA", Tool: "redis-benchmark", Requests: 200_000, RPS: 80_000, P50: 0.5, P99: 1.25, RedisCPU: 21.5, ServiceCPU: math.NaN()},
		Rows: []FrontRow{
			{Door: "resp (RL.TAKE)", Tool: "redis-benchmark", Requests: 200_000, RPS: 40_000, P50: 1.1, P99: 2.75, Store: 200_000, RedisCPU: 23.25, ServiceCPU: 30.5},
			{Door: "http", Tool: "Go", Requests: 200_000, RPS: 20_000, P50: 2.2, P99: 5.5, Store: 200_001, RedisCPU: 24, ServiceCPU: 50},
			{Door: "grpc", Tool: "Go", Requests: 200_000, RPS: 15_000, P50: 3, P99: 7.5, Store: 200_000, RedisCPU: 25, ServiceCPU: 60},
			{Door: "gubernator", Tool: "Go", Requests: 200_000, RPS: 30_000, P50: 1.5, P99: 3.5, Store: -1, StoreNote: "— (its own memory)", RedisCPU: math.NaN(), ServiceCPU: 40},
			{Door: "envoyproxy/ratelimit (peer)", Tool: "Go", Requests: 200_000, RPS: 10_000, P50: 4.5, P99: 11.25, Store: -1, StoreNote: "— (its own keys)", RedisCPU: 50, ServiceCPU: 150},
		}, Elapsed: 95 * time.Second}
	soak := &SoakReport{Samples: []SoakSample{
		{At: 0, Goroutines: 20, RSSKiB: 53_145, FDs: 18, Fault: "start"},
		{At: 10 * time.Second, Decisions: 21_050, Errors: 2, Goroutines: 21, RSSKiB: 74_547, FDs: 25, Fault: "SCRIPT FLUSH on every node"},
		{At: 20 * time.Second, Decisions: 43_110, Errors: 2, Goroutines: 19, RSSKiB: 74_000, FDs: 26, Fault: "load stopped"},
	}}
	return map[string]interface{ Markdown() string }{"bench": bench, "bench-lease": lease, "fronts": fronts, "soak": soak, "workload": sampleWorkloadReport()}
}

// The reports of sluice-lab bench, bench --front and the soak, byte for byte,
// like the labs'.
func TestOtherMarkdownGolden(t *testing.T) {
	t.Parallel()
	for name, rep := range otherReports() {
		path := filepath.Join("testdata", name+".golden.md")
		got := rep.Markdown()
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("%s report differs from %s:\n--- got\n%s\n--- want\n%s", name, path, got, want)
		}
	}
}
