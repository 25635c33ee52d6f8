package bench

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults of RegionsLabConfig.
const (
	DefaultRegionsLabRTT         = 80 * time.Millisecond
	DefaultRegionsLabDuration    = 60 * time.Second
	DefaultRegionsLabBaseline    = 20 * time.Second
	DefaultRegionsLabCut         = 10 * time.Second
	DefaultRegionsLabSettle      = 5 * time.Second
	DefaultRegionsLabAfter       = 5 * time.Second
	DefaultRegionsLabLimit       = 500
	DefaultRegionsLabRate        = 500 // per second
	DefaultRegionsLabFloor       = 0.1
	DefaultRegionsLabWorkers     = 128 // per region
	DefaultRegionsLabMaxRequests = 1_000_000
	DefaultRegionsLabCutMode     = "stall"
)

// The lab's regions and the shares of the load before and after the shift.
var (
	regionsLabNames  = []string{"eu", "us"}
	regionsLabBefore = []float64{0.7, 0.3}
	regionsLabAfter  = []float64{0.3, 0.7}
)

const (
	// regionsFollowTolerance and regionsFollowWindow define "the
	// allocation follows the shift": a region's share of the admissions
	// over a window of one second is within 0.05 (five points) of its
	// share of the requests. A relative band (10 % of 0.3 is ±0.03) is
	// narrower than the noise of counting a batch allocation in one-second
	// windows: at five claim rounds a second, a window holds one round
	// more or less, about ±0.05 of a 30 % region's share.
	regionsFollowTolerance = 0.05
	regionsFollowWindow    = time.Second
	// regionsFollowHold is how long the share must stay in the band
	// for the allocation to have followed.
	regionsFollowHold = 5 * time.Second
	regionsBin        = 100 * time.Millisecond
	// regionsAfterWindow is the window after home returns in which a
	// burst would show.
	regionsAfterWindow = 2 * time.Second
	// regionsInstances are the sluice processes per region.
	regionsInstances = 2
)

// RegionsLabConfig says what `sluice-lab regions` measures. The zero value
// is the experiment: three local clusters (regions eu and us, 3
// primaries each without replicas; home, 3 primaries with a replica each)
// with 80 ms of round trip between each region and home, two sluice
// processes per region, one key whose global budget is 500 tokens refilled
// 500/s, and twice that in demand, 70 % from eu and 30 % from us, then
// 30/70 halfway through a 60 s run; a purely regional baseline of 20 s;
// eu stalled from home for 10 s.
type RegionsLabConfig struct {
	// Binary is the sluice binary; "" means sluiceBinary's.
	Binary string
	// RTT is the round trip between a region and home, added by delay
	// proxies in front of every home node; 0 means 80ms.
	RTT time.Duration
	// Duration is the load of the synchronous and of the per-region rows,
	// with the shift halfway; 0 means 60s. Baseline is that of the purely
	// regional row; 0 means 20s.
	Duration, Baseline time.Duration
	// Cut is how long eu is cut off from home; 0 means 10s. Settle is the
	// load before the cut and After the load after it; 0 means 5s each
	// (After at least 2s).
	Cut, Settle, After time.Duration
	// CutMode is how eu is cut off: "stall" (every byte held: timeouts,
	// as in a partition) or "reset" (connections reset and refused); ""
	// means stall.
	CutMode string
	// Limit and Rate (per second) are the global budget; 0 means 500 and
	// 500. Demand is the requests per second over both regions; 0 means
	// twice Rate. Floor is region_floor; 0 means 0.1.
	Limit, Rate int64
	Demand      float64
	Floor       float64
	// Workers is the load goroutines per region, each with one request in
	// flight; 0 means 128. MaxRequests bounds the requests of each row;
	// 0 means 1,000,000.
	Workers     int
	MaxRequests int64
	// Now is the clock of the report's date; nil means time.Now.
	Now func() time.Time
}

func (c *RegionsLabConfig) resolve() error {
	c.RTT = cmp.Or(c.RTT, DefaultRegionsLabRTT)
	c.Duration = cmp.Or(c.Duration, DefaultRegionsLabDuration)
	c.Baseline = cmp.Or(c.Baseline, DefaultRegionsLabBaseline)
	c.Cut = cmp.Or(c.Cut, DefaultRegionsLabCut)
	c.Settle = cmp.Or(c.Settle, DefaultRegionsLabSettle)
	c.After = cmp.Or(c.After, DefaultRegionsLabAfter)
	c.CutMode = cmp.Or(c.CutMode, DefaultRegionsLabCutMode)
	c.Limit = cmp.Or(c.Limit, DefaultRegionsLabLimit)
	c.Rate = cmp.Or(c.Rate, DefaultRegionsLabRate)
	c.Demand = cmp.Or(c.Demand, 2*float64(c.Rate))
	c.Floor = cmp.Or(c.Floor, DefaultRegionsLabFloor)
	c.Workers = cmp.Or(c.Workers, DefaultRegionsLabWorkers)
	c.MaxRequests = cmp.Or(c.MaxRequests, DefaultRegionsLabMaxRequests)
	orNow(&c.Now)
	switch {
	case c.RTT < 0 || c.Duration < 0 || c.Baseline < 0 || c.Cut < 0 || c.Settle < 0 || c.After < 0:
		return errors.New("lab regions: durations must not be negative")
	case c.After < regionsAfterWindow:
		return fmt.Errorf("lab regions: after %v: want at least %v, the window in which a burst at home's return would show", c.After, regionsAfterWindow)
	case c.Duration < 2*regionsFollowWindow:
		return fmt.Errorf("lab regions: duration %v: want at least %v, so that each half has a window", c.Duration, 2*regionsFollowWindow)
	case c.CutMode != "stall" && c.CutMode != "reset":
		return fmt.Errorf("lab regions: cut mode %q: want stall or reset", c.CutMode)
	case c.Limit < 0 || c.Rate < 0 || c.Demand < 0 || c.Workers < regionsInstances || c.MaxRequests < 0:
		return fmt.Errorf("lab regions: limit, rate, demand and max requests must not be negative, workers at least %d", regionsInstances)
	case c.Floor < 0 || c.Floor > 1:
		return fmt.Errorf("lab regions: floor %v: want a share from 0 to 1", c.Floor)
	case c.RTT/2 > time.Second:
		return fmt.Errorf("lab regions: round trip %v: want at most 2s", c.RTT)
	}
	return nil
}

func (c *RegionsLabConfig) rig() rigSpec {
	// The rig's cluster is home: 3 primaries with a replica each.
	return rigSpec{name: "lab regions", binary: c.Binary, now: c.Now,
		tool: fmt.Sprintf("go-redis, paced: %d goroutines per region, one request in flight each", c.Workers)}
}

// config is the report's config, for RunLab.
func (rep *RegionsLabReport) config() labConfig { return &rep.Config }

// The setups of the comparison.
const (
	RegionsSync     = "one global synchronous store"
	RegionsRegional = "purely regional"
	RegionsAsync    = "per-region + async reconcile"
)

// RegionsLabReport is `sluice-lab regions`: the experiment and what it
// measured.
type RegionsLabReport struct {
	Config RegionsLabConfig
	// Rows are the three setups under the same load, in the order of the
	// constants above.
	Rows []RegionsLabRow
	// Shift is the per-region row around the shift of demand.
	Shift RegionsLabShift
	// Alloc is the allocation of the per-region row, per region, from the
	// INFO of its instances after the load.
	Alloc []RegionsLabAlloc
	// Cut is eu cut off from home.
	Cut RegionsLabCut
	// StoreTimeout is the synchronous row's policy timeout, HomeTimeout
	// the regions' --home-timeout.
	StoreTimeout, HomeTimeout time.Duration
	// Policies are the policy files of the three setups.
	Policies []string
	LabRun
}

// RegionsLabRow is one setup under the shifting load.
type RegionsLabRow struct {
	Setup    string
	Regions  []RegionsLabRegion
	Admitted int64
	// Elapsed runs from the start of the load to the last reply; Budget
	// is one global bucket's in that time, limit + rate × Elapsed.
	Elapsed time.Duration
	Budget  float64
	// Late counts the requests not sent because a worker was more than a
	// second behind (the load did not keep its pace).
	Late int64
	Pids []int
}

// Ratio is Admitted ÷ Budget.
func (r RegionsLabRow) Ratio() float64 { return ratio(float64(r.Admitted), r.Budget) }

// Errors counts the error replies of every region.
func (r RegionsLabRow) Errors() int64 {
	var n int64
	for _, g := range r.Regions {
		n += g.Errors
	}
	return n
}

// Region returns the row's line of the named region.
func (r RegionsLabRow) Region(name string) RegionsLabRegion {
	for _, g := range r.Regions {
		if g.Name == name {
			return g
		}
	}
	return RegionsLabRegion{Name: name, P50: math.NaN(), P99: math.NaN()}
}

// RegionsLabRegion is what one region's requests saw in one row.
type RegionsLabRegion struct {
	Name                             string
	Sent, Admitted, Rejected, Errors int64
	FirstError                       string
	// RPS is requests sent per second; P50 and P99 are the client's round
	// trip to its sluice, in milliseconds.
	RPS, P50, P99 float64
	DecidedBy     map[string]int64
}

// RegionsLabShift is the per-region row around the shift.
type RegionsLabShift struct {
	At      time.Duration
	Seconds []RegionsLabSecond
	Follow  []RegionsLabFollow
}

// RegionsLabSecond is one second of the per-region row, counted from the
// shift: the admissions and the requests of each region (in the order of
// the rows' regions) among the requests sent in that second.
type RegionsLabSecond struct {
	Second         int
	Admitted, Sent []int64
}

// Share is region i's share of the second's admissions.
func (s RegionsLabSecond) Share(i int) float64 {
	var all int64
	for _, a := range s.Admitted {
		all += a
	}
	return ratio(float64(s.Admitted[i]), float64(all))
}

// DemandShare is region i's share of the second's requests.
func (s RegionsLabSecond) DemandShare(i int) float64 {
	var all int64
	for _, a := range s.Sent {
		all += a
	}
	return ratio(float64(s.Sent[i]), float64(all))
}

// RegionsLabFollow is how long one region's allocation took to follow the
// shift: Took is -1 when it never settled.
type RegionsLabFollow struct {
	Region        string
	Before, After float64 // the region's share of the demand
	Took          time.Duration
	// Strays counts the one-second windows after it had followed (and
	// held for 5 s) whose share left the band again, of Later.
	Strays, Later int
}

// StraysCell says how steady the share stayed afterwards.
func (f RegionsLabFollow) StraysCell() string {
	if f.Took < 0 {
		return "—"
	}
	return fmt.Sprintf("%d of %d later seconds outside", f.Strays, f.Later)
}

// TookCell is Took for the table.
func (f RegionsLabFollow) TookCell() string {
	if f.Took < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1f s", f.Took.Seconds())
}

// RegionsLabAlloc is a region's allocation counters, summed over its
// instances (INFO # Region), and what its pools held at the end (the
// largest RL.REGIONS held among its instances).
type RegionsLabAlloc struct {
	Region                                   string
	Claims, Claimed, Returned, Debited, Lost int64
	PoolAdmitted, FloorAdmitted, HomeErrors  int64
	Held                                     int64
}

// RegionsLabCut is region eu cut off from home while the load (70/30)
// goes on.
type RegionsLabCut struct {
	Region, Mode string
	// Settle is the load before the cut, Cut its length, After the load
	// after home returned.
	Settle, Cut, After time.Duration
	// HeldAtCut is what eu's pool held when the cut began (RL.REGIONS).
	HeldAtCut int64
	// FloorLimit and FloorRate are the floor bucket: region_floor of the
	// global limit and rate; FloorBound is what it admits in Cut from
	// full, FloorLimit + FloorRate × Cut.
	FloorLimit, FloorRate, FloorBound float64
	// Admitted is what eu admitted of the requests it sent during the
	// cut; Sent how many it sent. PoolAdmitted and FloorAdmitted split
	// it by eu's counters over the cut (INFO).
	Admitted, Sent              int64
	PoolAdmitted, FloorAdmitted int64
	// Other is what the other region admitted during the cut, of Budget
	// (the global refill in Cut).
	Other       int64
	OtherBudget float64
	// Errors counts the error replies of the whole phase, both regions.
	Errors     int64
	FirstError string
	// Before and AfterReturn are what eu admitted in the 2 s before the
	// cut and in the 2 s after home returned; Fair is its share of the
	// global refill in 2 s (its demand share × rate × 2 s).
	Before, AfterReturn int64
	Fair                float64
	// Debited is what eu's floor admissions cost the global bucket once
	// home answered (INFO, from the cut to the end of the phase).
	Debited int64
	// HomeReachableAgain is how long after the cut ended eu reported home
	// reachable again (INFO region_home_reachable); -1 if it did not
	// within the phase.
	HomeReachableAgain time.Duration
	Regions            []RegionsLabRegion
}

// ReachCell is HomeReachableAgain for the table.
func (c RegionsLabCut) ReachCell() string {
	if c.HomeReachableAgain < 0 {
		return "not within the phase"
	}
	return c.HomeReachableAgain.Round(time.Millisecond).String()
}

// Bound is what eu may admit during the cut: its floor's bound and what
// its pool held.
func (c RegionsLabCut) Bound() float64 { return c.FloorBound + float64(c.HeldAtCut) }

// Within reports whether eu admitted no more than Bound during the cut.
func (c RegionsLabCut) Within() bool { return float64(c.Admitted) <= c.Bound() }

// OneWay is the delay each home proxy adds in each direction.
func (rep *RegionsLabReport) OneWay() time.Duration { return rep.Config.RTT / 2 }

// DemandOver is the demand over the global refill rate.
func (rep *RegionsLabReport) DemandOver() float64 {
	return ratio(rep.Config.Demand, float64(rep.Config.Rate))
}

// Markdown renders the report.
func (rep *RegionsLabReport) Markdown() string { return render("regions", rep) }

// Row returns the row of setup, or a zero row.
func (rep *RegionsLabReport) Row(setup string) RegionsLabRow {
	for _, r := range rep.Rows {
		if r.Setup == setup {
			return r
		}
	}
	return RegionsLabRow{Setup: setup}
}

// P99Over is how much the per-region row's p99 in region name exceeds the
// purely regional row's, in milliseconds; NaN without both rows.
func (rep *RegionsLabReport) P99Over(name string) float64 {
	return rep.Row(RegionsAsync).Region(name).P99 - rep.Row(RegionsRegional).Region(name).P99
}

// RegionsLabTarget is one target of the issue, measured.
type RegionsLabTarget struct {
	Target, Measured string
	Met              bool
}

// MetCell is the table's cell for Met.
func (t RegionsLabTarget) MetCell() string {
	if t.Met {
		return "yes"
	}
	return "**no**"
}

// Targets are the targets against what the run measured.
func (rep *RegionsLabReport) Targets() []RegionsLabTarget {
	var out []RegionsLabTarget
	async, sync := rep.Row(RegionsAsync), rep.Row(RegionsSync)
	for _, name := range regionsLabNames {
		over := rep.P99Over(name)
		out = append(out, RegionsLabTarget{
			Target:   fmt.Sprintf("p99 of a regional decision within 1 ms of a purely regional policy (%s)", name),
			Measured: fmt.Sprintf("%s ms vs %s ms (%+.3f ms)", ms(async.Region(name).P99), ms(rep.Row(RegionsRegional).Region(name).P99), over),
			Met:      over <= 1,
		})
	}
	minP50 := math.Inf(1)
	for _, g := range sync.Regions {
		minP50 = min(minP50, g.P50)
	}
	out = append(out, RegionsLabTarget{
		Target:   fmt.Sprintf("the synchronous row's p50 above the round trip (%v)", rep.Config.RTT),
		Measured: fmt.Sprintf("lowest p50 of its regions %s ms", ms(minP50)),
		Met:      minP50 > float64(rep.Config.RTT)/float64(time.Millisecond),
	})
	out = append(out, RegionsLabTarget{
		Target:   "admitted ÷ global budget between 0.95 and 1.02 (per-region row, with the shift)",
		Measured: fixed(async.Ratio(), 3),
		Met:      async.Ratio() >= 0.95 && async.Ratio() <= 1.02,
	})
	worst := time.Duration(0)
	for _, f := range rep.Shift.Follow {
		if f.Took < 0 {
			worst = -1
			break
		}
		worst = max(worst, f.Took)
	}
	out = append(out, RegionsLabTarget{
		Target:   "the allocation follows the shift within 3 s",
		Measured: map[bool]string{true: "never settled", false: fmt.Sprintf("%.1f s (the slower region)", worst.Seconds())}[worst < 0],
		Met:      worst >= 0 && worst <= 3*time.Second,
	})
	c := rep.Cut
	out = append(out, RegionsLabTarget{
		Target:   "zero error replies during a home-store outage",
		Measured: fmt.Sprintf("%d", c.Errors),
		Met:      c.Errors == 0,
	})
	out = append(out, RegionsLabTarget{
		Target:   "the cut-off region admits at most its floor plus what it held",
		Measured: fmt.Sprintf("%d ≤ %.0f + %d", c.Admitted, c.FloorBound, c.HeldAtCut),
		Met:      c.Within(),
	})
	return out
}
