package region

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// world is two regions of two instances each, every region on its own
// real Redis Cluster, and a home store on a real redis-server.
type world struct {
	home     *cluster.Store
	homeNode *localredis.Node
	regions  map[string][]*Layer
}

func newWorld(t *testing.T, regions ...string) *world {
	t.Helper()
	node := redistest.NewSingle(t)
	home, err := cluster.New(cluster.Config{URL: "redis://" + node.Addr, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { home.Close() })
	w := &world{home: home, homeNode: node, regions: map[string][]*Layer{}}
	for _, name := range regions {
		c := redistest.NewCluster(t, localredis.Config{Primaries: 3, Replicas: -1})
		store, err := cluster.New(cluster.Config{Addrs: c.Addrs(), Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		for i := range 2 {
			l, err := New(store, Config{Region: name, Instance: fmt.Sprint(i), Home: home, Tick: 50 * time.Millisecond, HomeTimeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			w.regions[name] = append(w.regions[name], l)
		}
	}
	return w
}

// tally is what one region's load saw.
type tally struct {
	asked, admitted, errs atomic.Int64
	other                 atomic.Int64 // decided_by other than region
	lastErr               atomic.Value
	// admitted and asked per 100 ms since the load began
	mu           sync.Mutex
	perBin, asks map[int]int64
}

func (t *tally) add(bin int, n int64) {
	t.mu.Lock()
	if t.perBin == nil {
		t.perBin = map[int]int64{}
	}
	t.perBin[bin] += n
	t.mu.Unlock()
}

func (t *tally) ask(bin int) {
	t.mu.Lock()
	if t.asks == nil {
		t.asks = map[int]int64{}
	}
	t.asks[bin]++
	t.mu.Unlock()
}

// between is what was admitted in [from, to) since the load began.
func (t *tally) between(from, to time.Duration) int64 { return t.sum(t.perBin, from, to) }

// askedBetween is what was asked in [from, to) since the load began.
func (t *tally) askedBetween(from, to time.Duration) int64 { return t.sum(t.asks, from, to) }

func (t *tally) sum(bins map[int]int64, from, to time.Duration) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int64
	for b := int(from / binWidth); b < int(to/binWidth); b++ {
		n += bins[b]
	}
	return n
}

const binWidth = 100 * time.Millisecond

// load sends takes of cost 1 to the layers of each region at the rate
// rate(region, elapsed) (requests/s, over all the region's instances)
// until d has passed, and returns what each region saw.
func load(t *testing.T, w *world, p *limit.Policy, key string, d time.Duration, rate func(name string, since time.Duration) float64) map[string]*tally {
	t.Helper()
	out := map[string]*tally{}
	start := time.Now()
	var wg sync.WaitGroup
	for name, ls := range w.regions {
		tl := &tally{}
		out[name] = tl
		for _, l := range ls {
			for range 4 { // workers per instance
				wg.Add(1)
				go func() {
					defer wg.Done()
					st := l.Store()
					next := time.Now()
					for {
						since := time.Since(start)
						if since >= d {
							return
						}
						r := rate(name, since) / float64(len(ls)*4)
						next = next.Add(time.Duration(float64(time.Second) / r))
						if wait := time.Until(next); wait > 0 {
							time.Sleep(wait)
						} else if wait < -100*time.Millisecond {
							next = time.Now() // fell behind: do not burst to catch up
						}
						ctx, cancel := context.WithTimeout(context.Background(), time.Second)
						res := make([]limit.Result, 1)
						st.Do(ctx, []limit.Request{{Key: key, Cost: 1, Op: limit.OpTake, Policy: p}}, res)
						cancel()
						tl.asked.Add(1)
						tl.ask(int(since / binWidth))
						switch {
						case res[0].Err != nil:
							tl.errs.Add(1)
							tl.lastErr.Store(res[0].Err.Error())
						case res[0].DecidedBy != limit.ByRegion:
							tl.other.Add(1)
						case res[0].Allowed:
							tl.admitted.Add(1)
							tl.add(int(time.Since(start)/binWidth), 1)
						}
					}
				}()
			}
		}
	}
	wg.Wait()
	return out
}

func (w *world) stats() (s Stats) { // summed over every instance
	for _, ls := range w.regions {
		for _, l := range ls {
			x := l.Snapshot()
			s.Claimed += x.Claimed
			s.Debited += x.Debited
			s.FloorAdmitted += x.FloorAdmitted
			s.PoolAdmitted += x.PoolAdmitted
			s.Returned += x.Returned
			s.Lost += x.Lost
		}
	}
	return s
}

// since returns the counters of s less those of s0.
func (s Stats) since(s0 Stats) Stats {
	s.Claimed -= s0.Claimed
	s.Debited -= s0.Debited
	s.FloorAdmitted -= s0.FloorAdmitted
	s.PoolAdmitted -= s0.PoolAdmitted
	s.Returned -= s0.Returned
	s.Lost -= s0.Lost
	return s
}

func globalPolicy(limitN, rate int64) *limit.Policy {
	return &limit.Policy{Name: "g", Match: "*", Algorithm: limit.TokenBucket, Limit: limitN, Rate: rate, Period: time.Second,
		OnStoreError: limit.FailClosed, Scope: limit.ScopeGlobal, RegionFloor: 0.1}
}

func checkClean(t *testing.T, tallies map[string]*tally) {
	t.Helper()
	for name, tl := range tallies {
		if n := tl.errs.Load(); n > 0 {
			t.Errorf("region %s: %d error replies (last: %v)", name, n, tl.lastErr.Load())
		}
		if n := tl.other.Load(); n > 0 {
			t.Errorf("region %s: %d decisions not decided_by region", name, n)
		}
	}
}

// TestRegions runs the experiments on one world (starting clusters is the
// slow part), each on its own key; the cut-off pauses home, so it is last.
func TestRegions(t *testing.T) {
	w := newWorld(t, "eu", "us")
	t.Run("AllocationHoldsTheGlobalBudget", func(t *testing.T) { testAllocationHoldsTheGlobalBudget(t, w) })
	t.Run("UncontendedDemandIsServed", func(t *testing.T) { testUncontendedDemandIsServed(t, w) })
	t.Run("AllocationFollowsTheShift", func(t *testing.T) { testAllocationFollowsTheShift(t, w) })
	t.Run("QuietRegionGivesBack", func(t *testing.T) { testQuietRegionGivesBack(t, w) })
	t.Run("CutOffDecidesByFloorThenRecovers", func(t *testing.T) { testCutOffDecidesByFloorThenRecovers(t, w) })
}

// testUncontendedDemandIsServed: a region asking half the global rate is
// not turned away for want of an allocation: once its demand is measured
// (the first half second), every request is admitted.
func testUncontendedDemandIsServed(t *testing.T, w *world) {
	p := globalPolicy(100, 400)
	only := &world{home: w.home, homeNode: w.homeNode, regions: map[string][]*Layer{"eu": w.regions["eu"]}}
	const d = 3 * time.Second
	tallies := load(t, only, p, "steady", d, func(string, time.Duration) float64 { return 200 })
	checkClean(t, tallies)
	eu := tallies["eu"]
	first, rest := eu.between(0, 500*time.Millisecond), eu.between(500*time.Millisecond, d)
	t.Logf("asked %d, admitted %d: %d in the first 0.5 s, %d in the 2.5 s after (asked about 500)", eu.asked.Load(), eu.admitted.Load(), first, rest)
	if asked := float64(eu.asked.Load()) * 2.5 / d.Seconds(); float64(rest) < 0.95*asked {
		t.Errorf("admitted %d of about %.0f asked after the first 0.5 s, with the global budget twice the demand", rest, asked)
	}
}

// testQuietRegionGivesBack: a region whose load stops gives what its pool
// holds back to home, where it can be claimed again. The global rate is 1
// a minute, so home's bucket shows exactly what came back.
func testQuietRegionGivesBack(t *testing.T, w *world) {
	p := globalPolicy(1000, 1)
	p.Period = time.Minute
	only := &world{home: w.home, homeNode: w.homeNode, regions: map[string][]*Layer{"eu": w.regions["eu"]}}
	tallies := load(t, only, p, "quiet", time.Second, func(string, time.Duration) float64 { return 200 })
	checkClean(t, tallies)
	ctx := context.Background()
	peek := func(st limit.Store) int64 {
		out := make([]limit.Result, 1)
		st.Do(ctx, []limit.Request{{Key: "quiet", Cost: 1, Op: limit.OpPeek, Policy: p}}, out)
		if out[0].Err != nil {
			t.Fatal(out[0].Err)
		}
		return out[0].Remaining
	}
	eu := w.regions["eu"][0].Store()
	// The pool may be empty at the instant the load stops, between a take
	// and a fill: the allocator's last claims (the demand it measured
	// decays over half a second) fill it.
	// The two peeks are two moments: a return or a claim landing between
	// them counts twice or not at all, so the pair is read until two reads
	// in a row agree.
	held, homeBefore := peek(eu), peek(w.home)
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
		h, b := peek(eu), peek(w.home)
		if h == held && b == homeBefore && held > 0 {
			break
		}
		held, homeBefore = h, b
	}
	if held == 0 {
		t.Fatal("the pool held nothing after the load: it should hold about one horizon of demand")
	}
	deadline := time.Now().Add(15 * time.Second)
	for peek(eu) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	left, homeAfter := peek(eu), peek(w.home)
	admitted := tallies["eu"].admitted.Load()
	t.Logf("admitted %d; the pool held %d when the load stopped, %d after 3 s quiet; home's bucket %d → %d of 1000",
		admitted, held, left, homeBefore, homeAfter)
	if left != 0 {
		t.Fatalf("%d left in the pool 15 s after the load stopped: a quiet region kept its tokens", left)
	}
	if homeAfter < homeBefore+held {
		t.Errorf("home's bucket went from %d to %d: the %d tokens the pool held did not come back", homeBefore, homeAfter, held)
	}
	if homeAfter > 1000-admitted+1 {
		t.Errorf("home's bucket holds %d after %d were admitted: more came back than was left", homeAfter, admitted)
	}
}

// testAllocationHoldsTheGlobalBudget: two regions asking 70/30 for twice
// the global rate together admit the global budget, no more, split by
// their demand.
func testAllocationHoldsTheGlobalBudget(t *testing.T, w *world) {
	p := globalPolicy(100, 400)
	s0 := w.stats()
	const d = 4 * time.Second
	tallies := load(t, w, p, "alloc", d, func(name string, _ time.Duration) float64 {
		if name == "eu" {
			return 560
		}
		return 240
	})
	checkClean(t, tallies)
	eu, us := tallies["eu"].admitted.Load(), tallies["us"].admitted.Load()
	s := w.stats().since(s0)
	budget := float64(p.Limit) + float64(p.Rate)*d.Seconds()
	undebited := float64(s.FloorAdmitted - s.Debited)
	t.Logf("admitted eu %d us %d = %d of budget %.0f (%.3f); asked %d+%d; claimed %d, floor %d, debited %d, lost %d",
		eu, us, eu+us, budget, float64(eu+us)/budget, tallies["eu"].asked.Load(), tallies["us"].asked.Load(), s.Claimed, s.FloorAdmitted, s.Debited, s.Lost)
	if got := float64(eu + us); got > budget*1.02+undebited {
		t.Errorf("admitted %v > budget %.0f ×1.02 + %v undebited floor admissions", got, budget, undebited)
	}
	if got := float64(eu + us); got < budget*0.85 {
		t.Errorf("admitted %v < 0.85 × budget %.0f: the allocation starves the regions", got, budget)
	}
	if share := float64(eu) / float64(eu+us); share < 0.6 || share > 0.8 {
		t.Errorf("eu's share of admissions %.2f, want 0.7 ± 0.1 (its share of demand)", share)
	}
	if s.Claimed == 0 || s.PoolAdmitted == 0 {
		t.Errorf("claimed %d, admitted from pools %d: the allocation never ran", s.Claimed, s.PoolAdmitted)
	}
	rs := w.regions["eu"][0].Regions()
	if len(rs) != 2 || rs[0].Name != "eu" || !rs[0].Self || rs[1].Name != "us" || rs[1].Demand <= 0 || rs[1].Keys != 1 || rs[0].LastContact <= 0 {
		t.Errorf("Regions() = %+v, want eu (self, in contact) then us with its demand", rs)
	}
}

// testAllocationFollowsTheShift: when the load shifts from 70/30 to
// 30/70, the admissions follow within a few seconds.
func testAllocationFollowsTheShift(t *testing.T, w *world) {
	p := globalPolicy(100, 400)
	const half = 3 * time.Second
	tallies := load(t, w, p, "shift", 2*half, func(name string, since time.Duration) float64 {
		hi := (name == "eu") == (since < half)
		if hi {
			return 560
		}
		return 240
	})
	checkClean(t, tallies)
	eu, us := tallies["eu"], tallies["us"]
	share := func(from, to time.Duration) float64 {
		a, b := eu.between(from, to), us.between(from, to)
		return float64(a) / float64(max(1, a+b))
	}
	// The share of demand is what the regions really asked: on a loaded
	// machine a region's workers may fall behind the rate they were set
	// (eu's 560/s at 0.59 of demand was seen once in the whole suite).
	demand := func(from, to time.Duration) float64 {
		a, b := eu.askedBetween(from, to), us.askedBetween(from, to)
		return float64(a) / float64(max(1, a+b))
	}
	before, after := share(half-time.Second, half), share(2*half-time.Second, 2*half)
	askedBefore, askedAfter := demand(half-time.Second, half), demand(2*half-time.Second, 2*half)
	follow := time.Duration(-1)
	for at := half; at+500*time.Millisecond <= 2*half; at += binWidth {
		if s := share(at, at+500*time.Millisecond); s < 0.4 {
			follow = at - half
			break
		}
	}
	t.Logf("eu's share of admissions: %.2f in the second before the shift, %.2f in the last second (of what was asked: %.2f, %.2f); below 0.4 %v after the shift", before, after, askedBefore, askedAfter, follow)
	if askedBefore-askedAfter < 0.2 {
		t.Errorf("eu's share of what was asked went from %.2f to %.2f (set: 0.7 to 0.3): the load did not shift", askedBefore, askedAfter)
	}
	if math.Abs(before-askedBefore) > 0.1 {
		t.Errorf("eu's share before the shift %.2f, want its share of demand %.2f ± 0.1", before, askedBefore)
	}
	if math.Abs(after-askedAfter) > 0.1 {
		t.Errorf("eu's share at the end %.2f, want its share of demand %.2f ± 0.1", after, askedAfter)
	}
	if follow < 0 || follow > 2*time.Second {
		t.Errorf("the allocation took %v to follow the shift (negative: never), want within 2s", follow)
	}
}

// testCutOffDecidesByFloorThenRecovers: while home is silent (paused with
// SIGSTOP), the regions answer every request without an error, from what
// they held and then from their floor, no more; when home answers again,
// claims resume, the floor's admissions are debited, and there is no
// burst.
func testCutOffDecidesByFloorThenRecovers(t *testing.T, w *world) {
	p := globalPolicy(100, 400) // floor: limit 10, rate 40/s
	w = &world{home: w.home, homeNode: w.homeNode, regions: map[string][]*Layer{"eu": w.regions["eu"]}}
	s0 := w.stats()
	const cutAt, cutFor, d = 1500 * time.Millisecond, 2 * time.Second, 5 * time.Second
	var held atomic.Int64
	go func() {
		time.Sleep(cutAt)
		for _, l := range w.regions["eu"] {
			held.Add(l.Regions()[0].Held)
		}
		if err := w.homeNode.Pause(); err != nil {
			t.Error(err)
			return
		}
		time.Sleep(cutFor)
		if err := w.homeNode.Resume(); err != nil {
			t.Error(err)
		}
	}()
	tallies := load(t, w, p, "cut", d, func(string, time.Duration) float64 { return 800 })
	checkClean(t, tallies)
	eu := tallies["eu"]
	during := eu.between(cutAt, cutAt+cutFor)
	after := eu.between(cutAt+cutFor+500*time.Millisecond, cutAt+cutFor+1500*time.Millisecond)
	s := w.stats().since(s0)
	// held tokens are shared by the region's two instances: count them once
	bound := float64(held.Load()/2) + 10 + 40*cutFor.Seconds()
	t.Logf("during the %v cut: admitted %d (held %d, floor bound %.0f); a second after it: %d (rate 400/s); floor admitted %d, debited %d",
		cutFor, during, held.Load()/2, bound, after, s.FloorAdmitted, s.Debited)
	if float64(during) > bound*1.05+5 {
		t.Errorf("admitted %d while cut off, more than held + floor = %.0f", during, bound)
	}
	if s.FloorAdmitted == 0 {
		t.Error("the floor admitted nothing: a cut-off region fell to zero")
	}
	if s.Debited == 0 {
		t.Error("nothing of the floor's admissions was debited at home after it came back")
	}
	if after < 200 || after > 520 {
		t.Errorf("admitted %d in the second from 0.5s after home came back, want about the rate, 400 (no burst, no starvation)", after)
	}
	if !w.regions["eu"][0].HomeReachable(time.Now().UnixNano()) {
		t.Error("home is not reachable again after the cut")
	}
}
