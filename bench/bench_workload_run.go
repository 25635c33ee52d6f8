package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/limit"
)

// RunWorkloads runs cfg's workloads through one sluice and straight at
// the primaries with one load generator, the sides alternating in each
// round, and reports both side by side with the primaries' CPU per
// decision; it prints the report to stdout and cfg.MarkdownPath. Each run
// is checked: every request answered with a decision, counted by
// sluice's INFO (every one by the store) or, direct, by one script call
// on the primaries. On an error nothing is written.
func RunWorkloads(ctx context.Context, cfg WorkloadConfig, stdout, progress io.Writer) (*WorkloadReport, error) {
	began := time.Now()
	if err := cfg.resolve(); err != nil {
		return nil, err
	}
	w, err := startWorkloads(ctx, cfg, progress)
	if err != nil {
		return nil, err
	}
	defer w.close()
	rep := &WorkloadReport{Config: cfg, Policy: WorkloadPolicy}
	if err := w.warmup(ctx); err != nil {
		return rep, err
	}
	total := cfg.Rounds * len(cfg.Workloads) * len(cfg.Depths) * 2
	for round := 1; round <= cfg.Rounds; round++ {
		for _, wl := range cfg.Workloads {
			for _, d := range cfg.Depths {
				for _, side := range []Side{Sluice, Direct} {
					run, err := w.runOne(ctx, round, wl, d, side)
					if err != nil {
						return rep, err
					}
					rep.Runs = append(rep.Runs, run)
					w.rig.logf("[%d/%d] round %d %-7s P%-3d %-6s %8.0f req/s  p50 %s ms  p99 %s ms  redis %s µs/decision  sluice %s µs/decision  admitted %s%%  %s decisions/call",
						len(rep.Runs), total, round, wl, d, side, run.RPS, ms(run.P50), ms(run.P99),
						fixed(run.RedisCPU, 1), fixed(run.SluiceCPU, 1), fixed(run.AdmittedShare(), 1), fixed(run.PerCall(), 1))
				}
			}
		}
	}
	rep.aggregate()
	rep.Machine = w.rig.machine(cfg.Now(), w.tool)
	rep.Elapsed = time.Since(began)
	return rep, rep.write(stdout)
}

// workloads is what RunWorkloads runs on: the rig, the store (the script
// loaded on every primary), the sluice child and the two doors.
type workloads struct {
	cfg     WorkloadConfig
	rig     *rig
	st      *store
	sl      *redis.Client
	buckets map[string]limit.Bucket
	sluice  sluiceDoor
	slots   []int
	tool    string
	// run names this invocation in every key, so that runs of another
	// invocation on the same cluster (A B A B of two binaries) never
	// meet its buckets, nor it theirs.
	run string
	// pid is the sluice child's, whose CPU the sluice side reads; ticks
	// the kernel's clock ticks per second.
	pid   int
	ticks int64
}

func startWorkloads(ctx context.Context, cfg WorkloadConfig, progress io.Writer) (*workloads, error) {
	buckets, err := workloadBuckets()
	if err != nil {
		return nil, err
	}
	w := &workloads{cfg: cfg, buckets: buckets, run: strconv.FormatInt(cfg.Now().UnixNano(), 36), ticks: clockTicks(),
		tool: "one raw-RESP load generator for both sides (" + strconv.Itoa(cfg.Clients) + " callers, the depth in flight each)"}
	if w.rig, err = newRig(ctx, rigSpec{name: "bench", binary: cfg.Binary, cluster: cfg.Cluster, policy: WorkloadPolicy}, progress); err != nil {
		return nil, err
	}
	if w.st, err = openStore(ctx, w.rig.seeds, buckets[WorkloadTenants]); err != nil {
		w.close()
		return nil, err
	}
	if w.slots, err = w.st.slotOwners(ctx); err != nil {
		w.close()
		return nil, err
	}
	if w.sl, err = w.rig.startOne(ctx, w.rig.seeds, w.rig.policy, redis.Options{}); err != nil {
		w.close()
		return nil, err
	}
	ch := w.rig.children[len(w.rig.children)-1]
	w.sluice, w.pid = sluiceDoor{addr: ch.addr}, ch.pid()
	w.rig.logf("sluice %s in front of %v; script %s on primaries %v", w.sluice.addr, w.rig.seeds, w.st.sha, w.st.primaries)
	return w, nil
}

func (w *workloads) close() {
	if w.st != nil {
		w.st.close()
	}
	w.rig.close()
}

// direct is the direct side's door for a workload: its bucket's
// arguments.
func (w *workloads) direct(workload string) directDoor {
	return directDoor{primaries: w.st.primaries, slots: w.slots, sha: w.st.sha, args: bucketArgs(w.buckets[workload])}
}

// keys are the keys of one run, under a prefix of its own.
func (w *workloads) keys(round int, workload string, depth int, side Side) keySource {
	k := keySource{prefix: defaultWorkloadKeyBase, keyspace: w.cfg.Keyspace, zipfS: w.cfg.Keys.Zipf, seed: w.cfg.Seed}
	switch workload {
	case WorkloadAbuse:
		k.prefix, k.keyspace, k.zipfS = abuseKeyBase, w.cfg.Logins, 0
	case WorkloadDurable:
		k.prefix = durableKeyBase
	case WorkloadHot:
		k.prefix, k.keyspace, k.zipfS = hotKeyBase, 1, 0
	}
	k.prefix += fmt.Sprintf(":%s.r%d.p%d.%s:", w.run, round, depth, side)
	return k
}

// warmup sends unrecorded tenant requests through each side once.
func (w *workloads) warmup(ctx context.Context) error {
	if w.cfg.Warmup == 0 {
		return nil
	}
	for _, side := range []Side{Sluice, Direct} {
		var d door = w.sluice
		if side == Direct {
			d = w.direct(WorkloadTenants)
		}
		k := w.keys(0, WorkloadTenants, w.cfg.Depths[0], side)
		res, err := generate(ctx, d, k, w.cfg.Clients, w.cfg.Depths[0], w.cfg.Warmup, w.cfg.RunTimeout)
		if err != nil {
			return w.rig.errorf("warm-up %s: %w", side, err)
		}
		w.rig.logf("warm-up %-6s %d requests: %.0f req/s", side, res.sent, float64(res.sent)/res.elapsed.Seconds())
	}
	return nil
}

// workloadCounters are what a run reads before and after: sluice's INFO
// and the primaries' script calls and CPU.
type workloadCounters struct {
	front   frontStats
	allowed int64
	calls   int64
	cpu     float64 // seconds
}

func (w *workloads) counters(ctx context.Context) (workloadCounters, error) {
	var c workloadCounters
	var err error
	if c.front, err = w.sluiceStats(ctx, &c.allowed); err != nil {
		return c, err
	}
	nodes, err := w.st.stats(ctx)
	if err != nil {
		return c, err
	}
	for _, n := range nodes {
		c.calls += n.scriptCalls
	}
	c.cpu, err = w.st.primaryCPU(ctx)
	return c, err
}

// sluiceStats reads sluice's decision counters and its allowed count.
func (w *workloads) sluiceStats(ctx context.Context, allowed *int64) (frontStats, error) {
	f := front{c: w.sl, addr: w.sluice.addr}
	st, err := f.stats(ctx)
	if err != nil {
		return st, err
	}
	text, err := w.sl.Do(ctx, "INFO", "sluice").Text()
	if err != nil {
		return st, fmt.Errorf("bench: INFO on sluice: %w", err)
	}
	*allowed, err = strconv.ParseInt(infoFields(text)["allowed"], 10, 64)
	return st, err
}

// leasesBack waits, up to 2 s, until sluice's leases hold no token: the
// unused ones go back to the primaries within 1.5 lease TTLs of the run's
// end, and their script calls belong to it, not to the next run.
func (w *workloads) leasesBack(ctx context.Context) {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var allowed int64
		if st, err := w.sluiceStats(ctx, &allowed); err != nil || st.leaseHeld <= 0 {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling sluice's INFO
	}
}

// runOne runs one side of one workload at one depth and checks it.
func (w *workloads) runOne(ctx context.Context, round int, workload string, depth int, side Side) (WorkloadRun, error) {
	run := WorkloadRun{Round: round, Workload: workload, Depth: depth, Side: side}
	var d door = w.sluice
	if side == Direct {
		d = w.direct(workload)
	}
	k := w.keys(round, workload, depth, side)
	run.Keys = k.prefix
	before, err := w.counters(ctx)
	if err != nil {
		return run, err
	}
	t0, err0 := cpuTicks([]int{w.pid})
	res, err := generate(ctx, d, k, w.cfg.Clients, depth, w.cfg.Requests, w.cfg.RunTimeout)
	if err != nil {
		return run, w.rig.errorf("round %d %s P%d %s: %w", round, workload, depth, side, err)
	}
	// sluice's CPU over the load alone: read before leasesBack polls its
	// INFO (the leases it then returns are a few script calls).
	t1, err1 := cpuTicks([]int{w.pid})
	run.SluiceCPU = math.NaN()
	if side == Sluice {
		if err0 == nil && err1 == nil {
			run.SluiceCPU = float64(t1-t0) * 1e6 / float64(w.ticks) / float64(res.sent)
		}
		w.leasesBack(ctx)
	}
	after, err := w.counters(ctx)
	if err != nil {
		return run, err
	}
	run.Requests, run.Admitted, run.Refused = res.sent, res.admitted, res.refused
	run.Elapsed, run.RPS = res.elapsed, float64(res.sent)/res.elapsed.Seconds()
	run.P50, run.P99 = Percentile(res.lat, 50), Percentile(res.lat, 99)
	run.ScriptCalls = after.calls - before.calls
	run.RedisCPU = (after.cpu - before.cpu) * 1e6 / float64(res.sent)
	run.Decisions = res.admitted + res.refused
	if side == Sluice {
		run.Decisions = after.front.decisions - before.front.decisions
		run.ByStore, run.ByDenyCache, run.ByLease = res.by["store"], res.by["deny-cache"], res.by["lease"]
	}
	return run, w.check(run, res, before, after)
}

// check fails a run whose counts say it measured something else than it
// claims.
func (w *workloads) check(run WorkloadRun, res genResult, before, after workloadCounters) error {
	where := w.rig.errorf("round %d %s P%d %s", run.Round, run.Workload, run.Depth, run.Side).Error()
	n := int64(w.cfg.Requests)
	switch {
	case run.Requests != n:
		return fmt.Errorf("%s: %d replies for %d requests", where, run.Requests, n)
	case run.Decisions != n:
		return fmt.Errorf("%s: %d decisions counted for %d requests", where, run.Decisions, n)
	case run.Side == Direct && run.ScriptCalls != n:
		return fmt.Errorf("%s: the primaries ran the script %d times for %d requests", where, run.ScriptCalls, n)
	case run.Side == Direct:
		return nil
	case run.ByStore+run.ByDenyCache+run.ByLease != n || after.front.byStore-before.front.byStore != run.ByStore ||
		after.front.byDeny-before.front.byDeny != run.ByDenyCache || after.front.byLease-before.front.byLease != run.ByLease:
		return fmt.Errorf("%s: %d + %d + %d of %d replies decided by the store, the deny cache and lease (INFO decided_by_store +%d, decided_by_deny_cache +%d, decided_by_lease +%d): %v",
			where, run.ByStore, run.ByDenyCache, run.ByLease, n, after.front.byStore-before.front.byStore, after.front.byDeny-before.front.byDeny,
			after.front.byLease-before.front.byLease, res.by)
	case after.allowed-before.allowed != run.Admitted:
		return fmt.Errorf("%s: sluice counted %d allowed, the replies %d", where, after.allowed-before.allowed, run.Admitted)
	case after.front.errorReplies != before.front.errorReplies:
		return fmt.Errorf("%s: sluice answered %d error replies", where, after.front.errorReplies-before.front.errorReplies)
	}
	return nil
}

// slotOwners maps every slot to the index of its primary in s.primaries.
func (s *store) slotOwners(ctx context.Context) ([]int, error) {
	shards, err := localredis.Shards(ctx, s.cc)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	slots := make([]int, 16384)
	for i := range slots {
		slots[i] = -1
	}
	for _, sh := range shards {
		idx := slices.Index(s.primaries, sh.Primary)
		if idx < 0 {
			return nil, fmt.Errorf("bench: CLUSTER SHARDS names %s, not a primary of %v", sh.Primary, s.primaries)
		}
		for _, r := range sh.Slots {
			for sl := r.Start; sl <= r.End; sl++ {
				slots[sl] = idx
			}
		}
	}
	for sl, i := range slots {
		if i < 0 {
			return nil, fmt.Errorf("bench: slot %d has no primary", sl)
		}
	}
	return slots, nil
}

// primaryCPU sums used_cpu_sys + used_cpu_user of INFO cpu over the
// primaries, in seconds.
func (s *store) primaryCPU(ctx context.Context) (float64, error) {
	var mu sync.Mutex
	var sum float64
	err := s.cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		text, err := c.Info(ctx, "cpu").Result()
		if err != nil {
			return fmt.Errorf("bench: INFO cpu on %s: %w", c.Options().Addr, err)
		}
		f := infoFields(text)
		sys, err1 := strconv.ParseFloat(f["used_cpu_sys"], 64)
		user, err2 := strconv.ParseFloat(f["used_cpu_user"], 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("bench: INFO cpu on %s lacks used_cpu_sys or used_cpu_user", c.Options().Addr)
		}
		mu.Lock()
		sum += sys + user
		mu.Unlock()
		return nil
	})
	return sum, err
}
