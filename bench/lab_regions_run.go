package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/delayproxy"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/limit"
)

// regionsUser is the Redis ACL user of a region's sluice processes, in
// every cluster. The home proxies tell the regions apart by it: it is in
// the first bytes of every connection (HELLO 3 AUTH <user> …), so eu can
// be cut off from home while us still reaches it through the same proxies.
func regionsUser(name string) string { return "sluice-" + name }

// classifyRegion names the proxy link of a connection to home: the region
// whose user it authenticates as, "" for any other client.
func classifyRegion(first []byte) string {
	for _, name := range regionsLabNames {
		u := regionsUser(name)
		if bytes.Contains(first, []byte("$"+strconv.Itoa(len(u))+"\r\n"+u+"\r\n")) {
			return name
		}
	}
	return ""
}

// regionsWorld is what the experiment runs on: the regions' clusters, home
// behind its proxies and the files the sluice processes need.
type regionsWorld struct {
	clusters map[string]*localredis.Cluster // by region
	home     *delayproxy.Cluster
	passFile string
	policies map[string]string // path by setup
}

// run is `sluice-lab regions`: the three setups under the same shifting
// load, then eu cut off from home.
func (rep *RegionsLabReport) run(ctx context.Context, rig *rig) error {
	c := rep.Config
	if rig.rc == nil {
		return rig.errorf("needs its own home cluster")
	}
	w, stop, err := rep.world(ctx, rig)
	defer stop()
	if err != nil {
		return err
	}
	stamp := c.Now().UnixNano()
	half := c.Duration / 2
	for i, setup := range []string{RegionsSync, RegionsRegional, RegionsAsync} {
		loads, err := rep.startSetup(ctx, rig, w, setup)
		if err != nil {
			return err
		}
		d, shift := c.Duration, half
		if setup == RegionsRegional {
			d, shift = c.Baseline, c.Baseline/2
		}
		rig.logf("[%d/4] %s: %v of load, %.0f requests/s, 70/30 → 30/70 at %v", i+1, setup, d, c.Demand, shift)
		res := drivePaced(ctx, rep.spec(fmt.Sprintf("checkout:%d:%d", stamp, i), loads, d, shift, nil))
		row := rep.row(setup, res, rig.pids())
		rep.Rows = append(rep.Rows, row)
		rig.logf("[%d/4] %s: %s", i+1, setup, row.summary())
		if setup == RegionsAsync {
			rep.Shift = shiftTable(res, shift, d)
			rig.logf("      eu's share of the admissions, each second: %s", shareSeries(res, 0, d))
			for _, f := range rep.Shift.Follow {
				rig.logf("      %s: demand share %.0f%% → %.0f%%, admitted share followed in %s; %s", f.Region, 100*f.Before, 100*f.After, f.TookCell(), f.StraysCell())
			}
			if rep.Alloc, err = allocation(ctx, loads); err != nil {
				return rig.errorf("reading the allocation: %w", err)
			}
			if err := rep.cutOff(ctx, rig, w, loads, fmt.Sprintf("checkout:%d:cut", stamp)); err != nil {
				return err
			}
		}
		rig.stopSluice()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// world starts the regions' clusters (3 primaries, no replicas: a
// region's own failures are not this lab's subject), gives every node of
// the three clusters the regions' ACL users, puts home behind delay
// proxies and writes the policy files. stop undoes it all, also after an
// error.
func (rep *RegionsLabReport) world(ctx context.Context, rig *rig) (*regionsWorld, func(), error) {
	c := rep.Config
	w := &regionsWorld{clusters: map[string]*localredis.Cluster{}, policies: map[string]string{}}
	var stops []func()
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	for _, name := range regionsLabNames {
		rig.logf("starting region %s's Redis Cluster (3 primaries, no replicas)", name)
		rc, err := localredis.Start(ctx, localredis.Config{Replicas: -1, Log: linePrefix{rig.progress, rig.name + ": " + name + ": "}})
		if err != nil {
			return nil, stop, err
		}
		stops = append(stops, func() {
			if err := rc.Stop(); err != nil {
				rig.logf("stopping region %s's cluster: %v", name, err)
			}
		})
		w.clusters[name] = rc
	}
	var secret [16]byte
	_, _ = rand.Read(secret[:])
	pass := hex.EncodeToString(secret[:])
	w.passFile = filepath.Join(rig.dir, "store-pass")
	if err := os.WriteFile(w.passFile, []byte(pass+"\n"), 0o600); err != nil {
		return nil, stop, rig.errorf("%w", err)
	}
	for _, rc := range append([]*localredis.Cluster{rig.rc}, w.clusters[regionsLabNames[0]], w.clusters[regionsLabNames[1]]) {
		for _, n := range rc.Nodes() {
			for _, name := range regionsLabNames {
				if err := n.Client().Do(ctx, "ACL", "SETUSER", regionsUser(name), "reset", "on", ">"+pass, "~*", "&*", "+@all").Err(); err != nil {
					return nil, stop, rig.errorf("ACL SETUSER on %s: %w", n.Addr, err)
				}
			}
		}
	}
	home, err := delayproxy.ProxyClusterConfig(ctx, rig.rc, delayproxy.Config{Delay: c.RTT / 2, Classify: classifyRegion})
	if err != nil {
		return nil, stop, rig.errorf("%w", err)
	}
	stops = append(stops, func() {
		if err := home.Close(); err != nil {
			rig.logf("closing the home proxies: %v", err)
		}
	})
	w.home = home
	rig.logf("home %v behind %d proxies of %v one way each: %v", rig.rc.Addrs(), len(home.Seeds()), c.RTT/2, home.Seeds())

	rep.StoreTimeout = max(time.Second, 5*c.RTT)
	rep.HomeTimeout = max(500*time.Millisecond, 3*c.RTT)
	for _, setup := range []string{RegionsSync, RegionsRegional, RegionsAsync} {
		text := regionsPolicy(setup, c, rep.StoreTimeout)
		path, err := rig.writePolicy("regions-"+strings.Fields(setup)[0]+".yaml", text)
		if err != nil {
			return nil, stop, err
		}
		w.policies[setup] = path
		rep.Policies = append(rep.Policies, text)
	}
	return w, stop, nil
}

// regionsPolicy is the policy file of a setup: one key pattern with the
// global budget; ordinary in the synchronous and the regional setups,
// scope: global with the floor in the per-region one.
func regionsPolicy(setup string, c RegionsLabConfig, storeTimeout time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# written by sluice-lab regions: %s\n", setup)
	if setup == RegionsSync {
		// Every decision crosses to home: the deadline must exceed the
		// round trip, or every request would go to on_store_error.
		fmt.Fprintf(&b, "timeout: %s\n", storeTimeout)
	}
	fmt.Fprintf(&b, "policies:\n  - name: checkout\n    match: \"checkout:*\"\n    limit: %d\n    rate: %d\n    period: 1s\n", c.Limit, c.Rate)
	if setup == RegionsAsync {
		fmt.Fprintf(&b, "    scope: global\n    region_floor: %g\n", c.Floor)
	}
	b.WriteString("    on_store_error: closed\n")
	return b.String()
}

// startSetup starts two sluice processes per region for setup and returns
// each region's load, its shares still to set.
func (rep *RegionsLabReport) startSetup(ctx context.Context, rig *rig, w *regionsWorld, setup string) ([]regionLoad, error) {
	c := rep.Config
	var loads []regionLoad
	for i, name := range regionsLabNames {
		seeds := w.clusters[name].Addrs()
		extra := []string{"--store-user", regionsUser(name), "--store-pass-file", w.passFile}
		switch setup {
		case RegionsSync:
			seeds = w.home.Seeds()
		case RegionsAsync:
			// Home has the same ACL users; its credentials are flags of
			// its own (--store-* never apply to home).
			extra = append(extra, "--region", name, "--home-cluster", strings.Join(w.home.Seeds(), ","),
				"--home-user", regionsUser(name), "--home-pass-file", w.passFile,
				"--home-timeout", rep.HomeTimeout.String())
		}
		l := regionLoad{name: name, before: c.Demand * regionsLabBefore[i], after: c.Demand * regionsLabAfter[i]}
		for range regionsInstances {
			cl, err := rig.startOne(ctx, seeds, w.policies[setup], regionsClient(c.Workers/regionsInstances), extra...)
			if err != nil {
				return nil, err
			}
			l.clients = append(l.clients, cl)
		}
		loads = append(loads, l)
	}
	want := map[string]string{RegionsSync: limit.ByStore, RegionsRegional: limit.ByStore, RegionsAsync: limit.ByRegion}[setup]
	for _, l := range loads {
		for _, cl := range l.clients {
			v, err := takeOnce(ctx, cl, fmt.Sprintf("checkout:warm-up:%d", c.Now().UnixNano()))
			if err != nil {
				return nil, rig.errorf("%s, %s: %w", setup, l.name, err)
			}
			if v[5] != want || v[1] != c.Limit {
				return nil, rig.errorf("%s, %s: RL.TAKE = %v, want limit %d decided by %s: sluice does not run the lab's policy", setup, l.name, v, c.Limit, want)
			}
		}
	}
	rig.logf("%s: sluice pids %v", setup, rig.pids())
	return loads, nil
}

// regionsClient is the client of a region's sluice process: a pool for
// workers goroutines and timeouts longer than a cut-off stall.
func regionsClient(workers int) redis.Options {
	return redis.Options{PoolSize: workers + 2, MinIdleConns: workers, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
}

// spec is the paced load of one row on key.
func (rep *RegionsLabReport) spec(key string, loads []regionLoad, d, shift time.Duration, at []event) pacedSpec {
	c := rep.Config
	return pacedSpec{key: key, regions: loads, workers: c.Workers, duration: d, shift: shift,
		maxRequests: c.MaxRequests, limit: c.Limit, bin: regionsBin, at: at}
}

// row reads a paced load's result as a row of setup.
func (rep *RegionsLabReport) row(setup string, res pacedResult, pids []int) RegionsLabRow {
	c := rep.Config
	row := RegionsLabRow{Setup: setup, Elapsed: res.elapsed, Late: res.late, Pids: pids,
		Budget: labBudget(c.Limit, c.Rate, res.elapsed)}
	row.Regions = regionLines(res)
	for _, g := range row.Regions {
		row.Admitted += g.Admitted
	}
	return row
}

// regionLines are the regions' lines of a paced load; RPS is over the
// whole load.
func regionLines(res pacedResult) []RegionsLabRegion {
	var out []RegionsLabRegion
	for i, t := range res.regions {
		g := RegionsLabRegion{Name: regionsLabNames[i], Sent: t.sent, Admitted: t.admitted, Rejected: t.rejected,
			Errors: t.errors, DecidedBy: t.by, P50: Percentile(t.lat, 50), P99: Percentile(t.lat, 99)}
		if t.firstErr != nil {
			g.FirstError = t.firstErr.Error()
		}
		if res.elapsed > 0 {
			g.RPS = float64(t.sent) / res.elapsed.Seconds()
		}
		out = append(out, g)
	}
	return out
}

func (r RegionsLabRow) summary() string {
	var b strings.Builder
	for _, g := range r.Regions {
		fmt.Fprintf(&b, "%s %.0f req/s p50 %s p99 %s ms admitted %d errors %d (%s); ", g.Name, g.RPS, ms(g.P50), ms(g.P99), g.Admitted, g.Errors, formatCounts(g.DecidedBy))
	}
	fmt.Fprintf(&b, "admitted %d of a budget of %.0f (%.3f) in %v", r.Admitted, r.Budget, r.Ratio(), r.Elapsed.Round(time.Millisecond))
	if r.Late > 0 {
		fmt.Fprintf(&b, ", %d requests not sent (load behind)", r.Late)
	}
	return b.String()
}

// shiftTable is the per-second table around the shift and the time each
// region's admissions took to follow it.
func shiftTable(res pacedResult, shift, end time.Duration) RegionsLabShift {
	out := RegionsLabShift{At: shift}
	for s := -3; s <= 6; s++ {
		from := shift + time.Duration(s)*time.Second
		if from < 0 || from+time.Second > end {
			continue
		}
		sec := RegionsLabSecond{Second: s}
		for _, t := range res.regions {
			sec.Admitted = append(sec.Admitted, t.admittedBetween(res.bin, from, from+time.Second))
			sec.Sent = append(sec.Sent, t.sentBetween(res.bin, from, from+time.Second))
		}
		out.Seconds = append(out.Seconds, sec)
	}
	for i, name := range regionsLabNames {
		f := RegionsLabFollow{Region: name, Before: regionsLabBefore[i], After: regionsLabAfter[i]}
		f.Took, f.Strays, f.Later = followTime(res, i, shift, regionsFollowWindow, end, regionsFollowTolerance, regionsFollowHold)
		out.Follow = append(out.Follow, f)
	}
	return out
}

// shareSeries is region ri's share of the admissions in each second of a
// paced load, for the progress log.
func shareSeries(res pacedResult, ri int, d time.Duration) string {
	var b strings.Builder
	for from := time.Duration(0); from+time.Second <= d; from += time.Second {
		var all int64
		for _, t := range res.regions {
			all += t.admittedBetween(res.bin, from, from+time.Second)
		}
		fmt.Fprintf(&b, "%.2f ", ratio(float64(res.regions[ri].admittedBetween(res.bin, from, from+time.Second)), float64(all)))
	}
	return strings.TrimSpace(b.String())
}

// regionInfo is what one sluice instance says of its region: INFO's
// # Region counters and its own line of RL.REGIONS.
type regionInfo struct {
	fields map[string]string
	held   int64
}

func (ri regionInfo) int(name string) int64 {
	n, _ := strconv.ParseInt(ri.fields[name], 10, 64)
	return n
}

// readRegion asks one sluice instance for INFO and RL.REGIONS.
func readRegion(ctx context.Context, c *redis.Client) (regionInfo, error) {
	info, err := c.Do(ctx, "INFO").Text()
	if err != nil {
		return regionInfo{}, fmt.Errorf("INFO: %w", err)
	}
	ri := regionInfo{fields: infoFields(info)}
	if ri.fields["region"] == "" {
		return ri, fmt.Errorf("INFO has no # Region section")
	}
	v, err := c.Do(ctx, "RL.REGIONS").Slice()
	if err != nil {
		return ri, fmt.Errorf("RL.REGIONS: %w", err)
	}
	for _, line := range v {
		f := regionFields(line)
		if f["self"] == "1" {
			ri.held, _ = strconv.ParseInt(f["held"], 10, 64)
		}
	}
	return ri, nil
}

// regionFields reads one line of RL.REGIONS, a flat field/value array,
// into text values; anything else gives an empty map.
func regionFields(line any) map[string]string {
	out := map[string]string{}
	a, ok := line.([]any)
	if !ok {
		return out
	}
	for i := 0; i+1 < len(a); i += 2 {
		k, ok := a[i].(string)
		if !ok {
			continue
		}
		out[k] = fmt.Sprint(a[i+1])
	}
	return out
}

// readRegions reads every instance of load.
func readRegions(ctx context.Context, l regionLoad) ([]regionInfo, error) {
	var out []regionInfo
	for _, c := range l.clients {
		ri, err := readRegion(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.name, err)
		}
		out = append(out, ri)
	}
	return out, nil
}

// allocation sums each region's counters over its instances.
func allocation(ctx context.Context, loads []regionLoad) ([]RegionsLabAlloc, error) {
	var out []RegionsLabAlloc
	for _, l := range loads {
		infos, err := readRegions(ctx, l)
		if err != nil {
			return nil, err
		}
		a := RegionsLabAlloc{Region: l.name}
		for _, ri := range infos {
			a.Claims += ri.int("region_claims")
			a.Claimed += ri.int("region_tokens_claimed")
			a.Returned += ri.int("region_tokens_returned")
			a.Debited += ri.int("region_tokens_debited")
			a.Lost += ri.int("region_tokens_lost")
			a.PoolAdmitted += ri.int("region_pool_admitted")
			a.FloorAdmitted += ri.int("region_floor_admitted")
			a.HomeErrors += ri.int("region_home_errors")
			a.Held = max(a.Held, ri.held)
		}
		out = append(out, a)
	}
	return out, nil
}
