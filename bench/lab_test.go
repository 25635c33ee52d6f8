package bench

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/redistest"
)

// requireRedisBinaries fails the test when the lab cannot start a
// cluster: these tests are the lab's only check, so a machine without
// redis-server must not pass them by skipping.
func requireRedisBinaries(t *testing.T) {
	t.Helper()
	redistest.SkipShort(t, "redis-server and redis-cli (a lab cluster)")
	for _, name := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(name); err != nil {
			t.Fatalf("%s not found on PATH: the lab experiments need it (scripts/ensure-redis.sh installs it)", name)
		}
	}
}

// labCtx bounds one experiment of the tests.
func labCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// checkTable checks that md holds a markdown table with header and rows
// rows starting with each of the given first cells.
func checkTable(t *testing.T, md, header string, firstCells ...string) {
	t.Helper()
	if !strings.Contains(md, header) {
		t.Errorf("no table header %q in:\n%s", header, md)
	}
	for _, c := range firstCells {
		if !strings.Contains(md, "\n| "+c+" |") {
			t.Errorf("no row %q in:\n%s", c, md)
		}
	}
}

func TestGlobalLab(t *testing.T) {
	requireRedisBinaries(t)
	bin := buildSluice(t)
	rep, err := RunLab(labCtx(t), &GlobalLabReport{Config: GlobalLabConfig{Binary: bin, Duration: 2 * time.Second, Workers: 8}}, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	md := rep.Markdown()
	t.Logf("report:\n%s", md)
	if len(rep.Rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rep.Rows))
	}
	checkTable(t, md, "| Setup | allowed (global) | rejected | expected (100 + 50 × elapsed) | allowed ÷ expected | verdict |",
		"1 process, Redis (cluster)", "2 processes, Redis (shared bucket)", "2 processes, in-process bucket (embedded mode)")
	one, shared, embedded := rep.Rows[0], rep.Rows[1], rep.Rows[2]
	for _, r := range rep.Rows {
		if r.Errors != 0 {
			t.Errorf("%s: %d error replies, first %q", r.Setup, r.Errors, r.FirstError)
		}
		if r.Rejected == 0 {
			t.Errorf("%s: nothing rejected: the load never reached the limit", r.Setup)
		}
	}
	if hi := one.Expected*1.01 + 1; float64(one.Allowed) > hi || float64(one.Allowed) < 0.9*one.Expected {
		t.Errorf("1 process: allowed %d, want within 90%%…101%% of expected %.1f", one.Allowed, one.Expected)
	}
	if q := float64(shared.Allowed) / float64(one.Allowed); q < 0.75 || q > 1.25 {
		t.Errorf("2 processes on the cluster allowed %d, 1 process %d (%.2f×): want within ±25%%", shared.Allowed, one.Allowed, q)
	}
	if q := float64(embedded.Allowed) / float64(one.Allowed); q < 1.6 {
		t.Errorf("2 embedded processes allowed %d, 1 process %d (%.2f×): want at least 1.6×", embedded.Allowed, one.Allowed, q)
	}
	for i, want := range []string{"cap holds", "cap holds ACROSS processes", "2× overshoot — the lie"} {
		if got := rep.Rows[i].Verdict(); got != want {
			t.Errorf("%s: verdict %q, want %q", rep.Rows[i].Setup, got, want)
		}
	}
}

func TestPartitionLab(t *testing.T) {
	requireRedisBinaries(t)
	bin := buildSluice(t)
	cfg := PartitionLabConfig{Binary: bin, Pause: 1500 * time.Millisecond, Workers: 2}
	rep, err := RunLab(labCtx(t), &PartitionLabReport{Config: cfg}, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	md := rep.Markdown()
	t.Logf("report:\n%s", md)
	if len(rep.Rows) != 3 {
		t.Fatalf("%d rows, want open, closed, local", len(rep.Rows))
	}
	checkTable(t, md, "| Setup | allowed | rejected | error replies | slowest reply | decided_by |",
		"2 processes, primary paused, on_store_error open", "2 processes, primary paused, on_store_error closed",
		"2 processes, primary paused, on_store_error local (local_share 0.5)")
	rows := map[string]PartitionLabRow{}
	for _, r := range rep.Rows {
		rows[r.Mode] = r
		if r.Errors != 0 {
			t.Errorf("%s: %d error replies, first %q", r.Mode, r.Errors, r.FirstError)
		}
		if r.Slowest > rep.Config.Timeout+250*time.Millisecond {
			t.Errorf("%s: slowest reply %v, want within the %v timeout plus 250ms", r.Mode, r.Slowest, rep.Config.Timeout)
		}
		// Until the breaker's PING goes unanswered (the node answered
		// within the cool-down), a timeout is overload: on_overload, which
		// is local for an open policy and the same mode otherwise.
		overload := "overload-" + r.Mode
		if r.Mode == "open" {
			overload = "overload-local"
		}
		fallback, over := r.DecidedBy["fallback-"+r.Mode], r.DecidedBy[overload]
		if fallback+over != r.Allowed+r.Rejected || fallback <= over {
			t.Errorf("%s: decided_by %s: want every decision by fallback-%s or %s, most by fallback-%s", r.Mode, formatCounts(r.DecidedBy), r.Mode, overload, r.Mode)
		}
	}
	if r := rows["open"]; r.Rejected != 0 || r.Allowed == 0 {
		t.Errorf("open: allowed %d rejected %d: want everything admitted", r.Allowed, r.Rejected)
	}
	if r := rows["closed"]; r.Allowed != 0 || r.Rejected == 0 {
		t.Errorf("closed: allowed %d rejected %d: want nothing admitted", r.Allowed, r.Rejected)
	}
	if r := rows["local"]; r.Allowed == 0 || float64(r.Allowed) > r.Share*1.01+float64(rep.Config.Instances) || float64(r.Allowed) < 0.8*r.Share {
		t.Errorf("local: allowed %d: want its share, %.1f (each process ⌊limit × 0.5⌋ + ⌊rate × 0.5⌋ × elapsed)", r.Allowed, r.Share)
	}
	for mode, want := range map[string]string{"closed": "cap kept, tenant down", "local": "degraded: each process admits its share, cap kept"} {
		if got := rows[mode].Verdict(); got != want {
			t.Errorf("%s: verdict %q, want %q", mode, got, want)
		}
	}
	if got := rows["open"].Verdict(); !strings.HasPrefix(got, "availability kept, cap lost") {
		t.Errorf("open: verdict %q, want availability kept, cap lost", got)
	}
}

func TestRestartLab(t *testing.T) {
	requireRedisBinaries(t)
	bin := buildSluice(t)
	cfg := RestartLabConfig{Binary: bin, Down: 500 * time.Millisecond, Window: 500 * time.Millisecond, Workers: 2}
	rep, err := RunLab(labCtx(t), &RestartLabReport{Config: cfg}, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	md := rep.Markdown()
	t.Logf("report:\n%s", md)
	if len(rep.Rows) != 3 {
		t.Fatalf("%d rows, want flush, restart, failover", len(rep.Rows))
	}
	checkTable(t, md, "| Event | requests during | error replies | NOSCRIPT → reloads | strict again after |",
		"SCRIPT FLUSH on the owning primary", "primary SIGKILLed, restarted empty 500ms later (no failover)",
		"primary SIGKILLed, replica promoted (cluster-node-timeout 1s)")
	for _, r := range rep.Rows {
		if r.Errors != 0 {
			t.Errorf("%s: %d error replies, first %q", r.Event, r.Errors, r.FirstError)
		}
		if r.Requests == 0 || r.Strict <= 0 {
			t.Errorf("%s: %d requests, strict again after %v: want load and a strict decision", r.Event, r.Requests, r.Strict)
		}
	}
	if r := rep.Rows[0]; r.NoScript == 0 || r.Evals == 0 {
		t.Errorf("SCRIPT FLUSH: NOSCRIPT %d, reloads %d: the reload path was not exercised", r.NoScript, r.Evals)
	}
	for _, r := range rep.Rows[1:] {
		if r.DecidedBy["fallback-local"] == 0 {
			t.Errorf("%s: decided_by %s: want the failure policy to answer while the owner is gone", r.Event, formatCounts(r.DecidedBy))
		}
	}
}

func TestLatencyLab(t *testing.T) {
	requireRedisBinaries(t)
	bin := buildSluice(t)
	rep, err := RunLab(labCtx(t), &LatencyLabReport{Config: LatencyLabConfig{Binary: bin, Samples: 2000}}, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	md := rep.Markdown()
	t.Logf("report:\n%s", md)
	if len(rep.Rows) != 4 {
		t.Fatalf("%d rows, want 4 paths", len(rep.Rows))
	}
	checkTable(t, md, "| Path | p50 | p99 | decided by | note |",
		"in-process Go decision (local.Store.Do)", "RL.TAKE → sluice, embedded (no Redis)",
		"RL.TAKE → sluice → Redis Cluster", "EVALSHA straight to the owning primary")
	for _, r := range rep.Rows {
		if r.Samples != 2000 || !(r.P50 > 0) || r.P99 < r.P50 {
			t.Errorf("%s: %d samples, p50 %v, p99 %v", r.Path, r.Samples, r.P50, r.P99)
		}
	}
	checkTable(t, md, "| Path | samples | max | allowed | decided_by |")
	for i, want := range []string{"embedded", "embedded", "store", "store"} {
		r := rep.Rows[i]
		if r.Want != want || r.Check() != "" {
			t.Errorf("%s: decided_by %s (%d allowed): want at least %.0f%% of %d by %s (%q)", r.Path, formatCounts(r.DecidedBy), r.Allowed, 100*MinWantShare, r.Samples, want, r.Check())
		}
	}
	inproc := rep.Rows[0]
	for _, r := range rep.Rows[1:3] {
		if inproc.P50 >= r.P50 {
			t.Errorf("in-process p50 %v ms not below %s p50 %v ms", inproc.P50, r.Path, r.P50)
		}
	}
}

func TestGlobalLabVerdict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		processes int
		allowed   int64
		errors    int64
		want      string
	}{
		{1, 600, 0, "cap holds"},
		{2, 590, 0, "cap holds ACROSS processes"},
		{2, 1195, 0, "2× overshoot — the lie"},
		{3, 1800, 0, "3× overshoot — the lie"},
		{2, 720, 0, "cap exceeded (1.20×)"},
		{1, 300, 0, "under the cap (0.50×): load too low?"},
		{1, 600, 3, "3 error replies"},
	} {
		r := GlobalLabRow{Processes: tc.processes, Allowed: tc.allowed, Errors: tc.errors, Expected: 600}
		if got := r.Verdict(); got != tc.want {
			t.Errorf("%d processes, %d allowed of 600, %d errors: got %q, want %q", tc.processes, tc.allowed, tc.errors, got, tc.want)
		}
	}
}

func TestPartitionLabVerdict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		allowed, rejected, errors int64
		want                      string
	}{
		{6000, 0, 0, "availability kept, cap lost (24.0× the cap)"},
		{200, 0, 0, "availability kept (the load stayed under the cap)"},
		{0, 6000, 0, "cap kept, tenant down"},
		{240, 6000, 0, "degraded: each process admits its share, cap kept"},
		{400, 6000, 0, "over its share: 1.60× the cap"},
		{0, 0, 0, "no replies"},
		{10, 10, 2, "2 error replies: the policy did not answer"},
	} {
		r := PartitionLabRow{Allowed: tc.allowed, Rejected: tc.rejected, Errors: tc.errors, Cap: 250, Share: 250}
		if got := r.Verdict(); got != tc.want {
			t.Errorf("allowed %d rejected %d errors %d: got %q, want %q", tc.allowed, tc.rejected, tc.errors, got, tc.want)
		}
	}
}

func TestLatencyLabRowCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		want    string
		samples int
		by      map[string]int64
		ok      bool
	}{
		{"store", 20_000, map[string]int64{"store": 20_000}, true},
		{"store", 20_000, map[string]int64{"store": 19_800, "overload-closed": 200}, true},
		{"store", 20_000, map[string]int64{"store": 19_799, "deny-cache": 201}, false},
		{"store", 20_000, map[string]int64{"deny-cache": 19_941, "store": 59}, false},
		{"embedded", 100, map[string]int64{"embedded": 100}, true},
		{"store", 100, map[string]int64{"embedded": 100}, false},
		{"store", 0, nil, false},
	} {
		r := LatencyLabRow{Path: "p", Samples: tc.samples, Want: tc.want, DecidedBy: tc.by}
		if got := r.Check() == ""; got != tc.ok {
			t.Errorf("want %s, %d samples, decided_by %s: check %q, want passing %v", tc.want, tc.samples, formatCounts(tc.by), r.Check(), tc.ok)
		}
	}
}
