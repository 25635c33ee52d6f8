package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// The regions lab end to end on real clusters at short durations and a
// low rate: every table is there, no request got an error reply, each
// setup was decided where it says (home's store, the region's own store,
// the region's allocation), the synchronous store never admits past one
// bucket, the per-region setup stays within the global budget plus what
// floors admitted (debited later), and eu cut off admits at most its floor
// plus what its pool held. Nothing here is about speed, except that a
// round trip to home cannot be shorter than the proxies' delay.
func TestRegionsLab(t *testing.T) {
	requireRedisBinaries(t)
	bin := buildSluice(t)
	cfg := RegionsLabConfig{Binary: bin, RTT: 40 * time.Millisecond, Duration: 3 * time.Second, Baseline: time.Second,
		Settle: 2 * time.Second, Cut: 2 * time.Second, After: 2 * time.Second,
		Limit: 100, Rate: 100, Demand: 200, Workers: 16}
	rep, err := RunLab(labCtx(t), &RegionsLabReport{Config: cfg}, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	md := rep.Markdown()
	t.Logf("report:\n%s", md)
	checkTable(t, md, "| setup | requests/s eu / us | p50 ms eu | p99 ms eu | p50 ms us | p99 ms us | admitted | budget (100 + 100 × elapsed) | admitted ÷ budget | error replies | decided_by |",
		RegionsSync, RegionsRegional, RegionsAsync)
	checkTable(t, md, "| second | eu admitted | us admitted | eu share of admissions | eu share of requests |", "0")
	checkTable(t, md, "| region | share of demand before → after | allocation followed the shift after | afterwards |", "eu", "us")
	checkTable(t, md, "| region | claims answered | tokens claimed |", "eu", "us")
	checkTable(t, md, "| region | requests/s | p50 ms | p99 ms | admitted | error replies | decided_by |", "eu", "us")
	checkTable(t, md, "| target | measured | met |")
	if strings.Contains(md, "bug:") {
		t.Errorf("the report did not render")
	}

	if len(rep.Rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rep.Rows))
	}
	want := map[string]string{RegionsSync: limit.ByStore, RegionsRegional: limit.ByStore, RegionsAsync: limit.ByRegion}
	for i, r := range rep.Rows {
		if r.Setup != []string{RegionsSync, RegionsRegional, RegionsAsync}[i] {
			t.Errorf("row %d is %q", i, r.Setup)
		}
		for _, g := range r.Regions {
			if g.Sent == 0 || g.Errors != 0 || g.Admitted+g.Rejected != g.Sent {
				t.Errorf("%s, %s: sent %d, admitted %d, rejected %d, errors %d (first: %s)", r.Setup, g.Name, g.Sent, g.Admitted, g.Rejected, g.Errors, g.FirstError)
			}
			if g.DecidedBy[want[r.Setup]] != g.Sent {
				t.Errorf("%s, %s: decided_by %s, want all %d by %s", r.Setup, g.Name, formatCounts(g.DecidedBy), g.Sent, want[r.Setup])
			}
			if g.P99 < g.P50 {
				t.Errorf("%s, %s: p50 %v ms > p99 %v ms", r.Setup, g.Name, g.P50, g.P99)
			}
		}
	}
	sync, async := rep.Row(RegionsSync), rep.Row(RegionsAsync)
	for _, g := range sync.Regions {
		if g.P50 < float64(cfg.RTT)/float64(time.Millisecond) {
			t.Errorf("synchronous row, %s: p50 %v ms, below the round trip %v to home", g.Name, g.P50, cfg.RTT)
		}
	}
	if float64(sync.Admitted) > sync.Budget+1 {
		t.Errorf("synchronous row: admitted %d of a budget of %.1f: one bucket admits no more", sync.Admitted, sync.Budget)
	}
	var floors int64
	for _, a := range rep.Alloc {
		floors += a.FloorAdmitted
		if a.Claims == 0 || a.Claimed == 0 {
			t.Errorf("region %s: %d claims answered, %d tokens claimed: the allocator never reached home", a.Region, a.Claims, a.Claimed)
		}
	}
	if len(rep.Alloc) != 2 {
		t.Errorf("%d allocation lines, want 2", len(rep.Alloc))
	}
	if bound := async.Budget*1.02 + float64(floors); float64(async.Admitted) > bound {
		t.Errorf("per-region row: admitted %d, more than the budget %.1f × 1.02 + %d floor admissions", async.Admitted, async.Budget, floors)
	}
	if len(rep.Shift.Seconds) == 0 || len(rep.Shift.Follow) != 2 {
		t.Errorf("shift: %d seconds, %d follow lines", len(rep.Shift.Seconds), len(rep.Shift.Follow))
	}

	c := rep.Cut
	t.Logf("cut: %+v", c)
	if c.Errors != 0 {
		t.Errorf("cut-off phase: %d error replies (first: %s), want none", c.Errors, c.FirstError)
	}
	if c.Sent == 0 || c.Admitted == 0 {
		t.Errorf("cut-off: eu sent %d, admitted %d during the cut: want requests, and its floor admitting some", c.Sent, c.Admitted)
	}
	// A claim answered in the instant between the peek and the stall can
	// add to the pool; 5 % covers it.
	if bound := c.Bound()*1.05 + 1; float64(c.Admitted) > bound {
		t.Errorf("cut-off: eu admitted %d during the cut, more than its floor %.1f + held %d (+5 %%)", c.Admitted, c.FloorBound, c.HeldAtCut)
	}
	if most := float64(cfg.Limit) + float64(cfg.Rate)*regionsAfterWindow.Seconds(); float64(c.AfterReturn) > most {
		t.Errorf("cut-off: eu admitted %d in the %v after home returned, more than the global bucket can give (%.0f)", c.AfterReturn, regionsAfterWindow, most)
	}
	if math.IsNaN(rep.P99Over("eu")) {
		t.Errorf("no p99 comparison for eu")
	}
}

func TestRegionsLabConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  RegionsLabConfig
		want string
	}{
		{RegionsLabConfig{After: time.Second}, "after 1s: want at least 2s"},
		{RegionsLabConfig{CutMode: "unplug"}, `cut mode "unplug"`},
		{RegionsLabConfig{Floor: 1.5}, "floor 1.5"},
		{RegionsLabConfig{Duration: time.Second}, "duration 1s"},
		{RegionsLabConfig{Workers: 1}, "workers at least 2"},
		{RegionsLabConfig{RTT: -time.Second}, "must not be negative"},
	} {
		err := tc.cfg.resolve()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("resolve(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	var c RegionsLabConfig
	if err := c.resolve(); err != nil {
		t.Fatal(err)
	}
	if c.RTT != 80*time.Millisecond || c.Duration != time.Minute || c.Cut != 10*time.Second || c.Demand != 1000 || c.Floor != 0.1 {
		t.Errorf("defaults: %+v", c)
	}
}

func TestClassifyRegion(t *testing.T) {
	for _, tc := range []struct{ first, want string }{
		{"*7\r\n$5\r\nhello\r\n$1\r\n3\r\n$4\r\nauth\r\n$9\r\nsluice-eu\r\n$4\r\npass\r\n", "eu"},
		{"*3\r\n$4\r\nAUTH\r\n$9\r\nsluice-us\r\n$4\r\npass\r\n", "us"},
		{"*1\r\n$4\r\nPING\r\n", ""},
		{"*3\r\n$4\r\nAUTH\r\n$10\r\nsluice-eux\r\n$4\r\npass\r\n", ""},
		{"", ""},
	} {
		if got := classifyRegion([]byte(tc.first)); got != tc.want {
			t.Errorf("classifyRegion(%q) = %q, want %q", tc.first, got, tc.want)
		}
	}
}

// followTime on made-up counts: region 0's share of the admissions moves
// from 0.7 to its share of the requests, 0.3, two seconds after the shift.
func TestFollowTime(t *testing.T) {
	const bin = 100 * time.Millisecond
	make2 := func(adm0 func(b int) int64) pacedResult {
		res := pacedResult{bin: bin}
		for ri := range 2 {
			tl := &regionTally{sentBins: make([]int64, 200), admittedBins: make([]int64, 200)}
			for b := range 200 {
				tl.sentBins[b] = []int64{30, 70}[ri]
				if ri == 0 {
					tl.admittedBins[b] = adm0(b)
				} else {
					tl.admittedBins[b] = 100 - adm0(b)
				}
			}
			res.regions = append(res.regions, tl)
		}
		return res
	}
	steady := make2(func(b int) int64 {
		if b < 20 {
			return 70
		}
		return 30
	})
	took, strays, later := followTime(steady, 0, 0, time.Second, 20*time.Second, 0.05, 5*time.Second)
	if took != 2900*time.Millisecond || strays != 0 || later == 0 {
		t.Errorf("steady: took %v, %d of %d later windows astray; want 2.9s (the window with one bin of the old share, 0.34, is in the band), none", took, strays, later)
	}
	// The same for the other region: one bin of the old share is 0.66.
	if took, _, _ := followTime(steady, 1, 0, time.Second, 20*time.Second, 0.05, 5*time.Second); took != 2900*time.Millisecond {
		t.Errorf("steady, the other region: took %v, want 2.9s", took)
	}
	blip := make2(func(b int) int64 {
		if b < 20 || (b >= 150 && b < 153) {
			return 70
		}
		return 30
	})
	if took, strays, _ := followTime(blip, 0, 0, time.Second, 20*time.Second, 0.05, 5*time.Second); took != 2900*time.Millisecond || strays != 1 {
		t.Errorf("a blip at 15 s: took %v, %d windows astray; want 2.9s and 1", took, strays)
	}
	// Back in the band for less than the hold, then out again.
	wobble := make2(func(b int) int64 {
		if b < 20 || (b >= 50 && b < 55) {
			return 70
		}
		return 30
	})
	if took, _, _ := followTime(wobble, 0, 0, time.Second, 20*time.Second, 0.05, 5*time.Second); took != 6400*time.Millisecond {
		t.Errorf("out again at 5 s: took %v, want 6.4s", took)
	}
	never := make2(func(int) int64 { return 70 })
	if took, _, _ := followTime(never, 0, 0, time.Second, 20*time.Second, 0.05, 5*time.Second); took != -1 {
		t.Errorf("never: took %v, want -1", took)
	}
}

// The regions report byte for byte from made-up figures, every kind of
// cell included: a row whose load fell behind, a region that never
// followed the shift, a target missed (go test -run
// TestRegionsLabMarkdownGolden -update rewrites it).
func TestRegionsLabMarkdownGolden(t *testing.T) {
	t.Parallel()
	rep := &RegionsLabReport{LabRun: LabRun{Machine: goldenMachine, Elapsed: 250 * time.Second},
		StoreTimeout: time.Second, HomeTimeout: 500 * time.Millisecond}
	if err := rep.Config.resolve(); err != nil {
		t.Fatal(err)
	}
	row := func(name string, rps, p50, p99 float64, adm int64, by string) RegionsLabRegion {
		return RegionsLabRegion{Name: name, Sent: int64(rps * 60), Admitted: adm, Rejected: int64(rps*60) - adm,
			RPS: rps, P50: p50, P99: p99, DecidedBy: map[string]int64{by: int64(rps * 60)}}
	}
	rep.Rows = []RegionsLabRow{
		{Setup: RegionsSync, Regions: []RegionsLabRegion{row("eu", 499, 118.9, 161.9, 13_583, "store"), row("us", 499, 118.2, 160.9, 16_773, "store")},
			Admitted: 30_356, Elapsed: 60149 * time.Millisecond, Budget: 30_574.5, Late: 12, Pids: []int{1, 2, 3, 4}},
		{Setup: RegionsRegional, Regions: []RegionsLabRegion{row("eu", 500, 0.28, 0.557, 8499, "store"), row("us", 500, 0.301, 0.553, 8500, "store")},
			Admitted: 16_999, Elapsed: 20002 * time.Millisecond, Budget: 10_501, Pids: []int{5, 6, 7, 8}},
		{Setup: RegionsAsync, Regions: []RegionsLabRegion{row("eu", 500, 0.337, 0.869, 15_282, "region"), row("us", 500, 0.347, 1.866, 14_955, "region")},
			Admitted: 30_237, Elapsed: 60001 * time.Millisecond, Budget: 30_500.5, Pids: []int{9, 10, 11, 12}},
	}
	rep.Shift = RegionsLabShift{At: 30 * time.Second, Seconds: []RegionsLabSecond{
		{Second: -1, Admitted: []int64{344, 148}, Sent: []int64{700, 300}},
		{Second: 0, Admitted: []int64{280, 226}, Sent: []int64{300, 700}},
	}, Follow: []RegionsLabFollow{
		{Region: "eu", Before: 0.7, After: 0.3, Took: 2600 * time.Millisecond, Strays: 1, Later: 22},
		{Region: "us", Before: 0.3, After: 0.7, Took: -1},
	}}
	rep.Alloc = []RegionsLabAlloc{{Region: "eu", Claims: 1452, Claimed: 15_483, Returned: 221, PoolAdmitted: 15_209, FloorAdmitted: 75, Debited: 75, Held: 54},
		{Region: "us", Claims: 1455, Claimed: 15_107, Returned: 221, PoolAdmitted: 14_886, FloorAdmitted: 71, Debited: 71, Lost: 3, HomeErrors: 1}}
	rep.Cut = RegionsLabCut{Region: "eu", Mode: "stall", Settle: 5 * time.Second, Cut: 10 * time.Second, After: 5 * time.Second,
		HeldAtCut: 1, FloorLimit: 50, FloorRate: 50, FloorBound: 550, Admitted: 528, Sent: 7000, PoolAdmitted: 2, FloorAdmitted: 526,
		Other: 2522, OtherBudget: 5000, Errors: 2, FirstError: "ERR a | b", Before: 712, AfterReturn: 428, Fair: 700, Debited: 534,
		HomeReachableAgain: 153 * time.Millisecond,
		Regions:            []RegionsLabRegion{row("eu", 700, 0.421, 1.193, 3904, "region"), row("us", 300, 0.434, 1.088, 4412, "region")}}
	for _, s := range []string{RegionsSync, RegionsRegional, RegionsAsync} {
		rep.Policies = append(rep.Policies, regionsPolicy(s, rep.Config, rep.StoreTimeout))
	}
	path := filepath.Join("testdata", "lab-regions.golden.md")
	got := rep.Markdown()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the regions report differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
