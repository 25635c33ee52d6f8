package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-rl/sluice/cluster"
)

// ErrNoRedisBenchmark is returned (wrapped) by Run when redis-benchmark
// cannot be found.
var ErrNoRedisBenchmark = errors.New("bench: redis-benchmark not found")

// Run measures sluice against direct EVALSHA as cfg says, writes progress
// lines to progress and the markdown report to stdout (and to
// cfg.MarkdownPath and cfg.SVGPath when set), and stops whatever it
// started. Either writer may be nil. It fails at the first run that
// redis-benchmark or a check rejects; it then writes nothing and returns
// the runs so far with the error.
func Run(ctx context.Context, cfg Config, stdout, progress io.Writer) (*Report, error) {
	began := time.Now()
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if progress == nil {
		progress = io.Discard
	}
	h := &harness{cfg: c, progress: progress}
	if h.bin, err = exec.LookPath(c.RedisBenchmark); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoRedisBenchmark, err)
	}
	bucket, err := benchBucket()
	if err != nil {
		return nil, err
	}

	rig, err := newRig(ctx, rigSpec{name: "bench", binary: c.Binary, cluster: c.Cluster, policy: Policy}, progress)
	if err != nil {
		return nil, err
	}
	defer rig.close()
	if h.store, err = openStore(ctx, rig.seeds, bucket); err != nil {
		return nil, err
	}
	defer h.store.close()
	if err := h.checkPids(rig); err != nil {
		return nil, err
	}
	defer h.closeSides()
	if err := h.startSides(ctx, rig); err != nil {
		return nil, err
	}

	rep := &Report{
		Machine:   machine(c.Now(), h.front.version, h.store.version, benchmarkVersion(h.bin)),
		Clients:   c.Clients,
		Keyspace:  c.Keyspace,
		Rounds:    c.Rounds,
		Threads:   c.Threads,
		Primaries: h.store.primaries,
		SluiceCPU: h.front.pid != 0,
		RedisCPU:  h.store.pids != nil,
	}
	err = h.measure(ctx, rep)
	rep.Elapsed = time.Since(began)
	rep.aggregate()
	if err != nil {
		// A partial report would pass for a whole one: write none.
		return rep, err
	}
	return rep, rep.write(stdout, c.MarkdownPath, c.SVGPath)
}

// checkPids checks, on a cluster the rig started, that its nodes report
// the pids of its processes: the CPU read from /proc is theirs.
func (h *harness) checkPids(rig *rig) error {
	if rig.rc == nil {
		return nil
	}
	var ownPids []int
	for _, n := range rig.rc.Nodes() {
		ownPids = append(ownPids, n.Pid)
	}
	slices.Sort(ownPids)
	if !slices.Equal(ownPids, h.store.pids) {
		return fmt.Errorf("bench: the cluster's nodes report pids %v, but its processes are %v", h.store.pids, ownPids)
	}
	return nil
}

// startSides connects to the sluice side (SluiceAddr, or a child the rig
// starts) and, unless NoEmbedded, starts the embedded side: the same
// binary and policy file, no store. Each must report its child's pid.
func (h *harness) startSides(ctx context.Context, rig *rig) error {
	addr := h.cfg.SluiceAddr
	if addr == "" {
		if _, err := rig.startSluice(ctx, 1, rig.seeds, rig.policy, 0); err != nil {
			return err
		}
		h.child = rig.children[0]
		addr = h.child.addr
	}
	var err error
	if h.front, err = newFront(ctx, addr); err != nil {
		return err
	}
	if h.child != nil && h.front.pid != h.child.pid() {
		return fmt.Errorf("bench: sluice at %s reports pid %d, but the child is %d", addr, h.front.pid, h.child.pid())
	}
	if h.cfg.NoEmbedded {
		return nil
	}
	if _, err := rig.startSluice(ctx, 1, nil, rig.policy, 0); err != nil {
		return err
	}
	emb := rig.children[len(rig.children)-1]
	if h.embedded, err = newFront(ctx, emb.addr); err != nil {
		return err
	}
	if h.embedded.pid != emb.pid() {
		return fmt.Errorf("bench: the embedded sluice at %s reports pid %d, but the child is %d", emb.addr, h.embedded.pid, emb.pid())
	}
	return nil
}

// closeSides closes the clients of the sides startSides connected to.
func (h *harness) closeSides() {
	if h.embedded != nil {
		h.embedded.close()
	}
	if h.front != nil {
		h.front.close()
	}
}

// harness holds what the runs need.
type harness struct {
	cfg      Config
	bin      string // redis-benchmark
	progress io.Writer
	store    *store
	front    *front
	embedded *front // the embedded side's sluice; nil with NoEmbedded
	child    *child // nil for a running sluice
	ticks    int64  // clock ticks per second of /proc times
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(h.progress, "bench: "+format+"\n", args...)
}

// measure checks every side once, warms them up and runs the rounds.
func (h *harness) measure(ctx context.Context, rep *Report) error {
	h.ticks = clockTicks()
	if err := h.front.sanity(ctx, "bench:sanity", "store"); err != nil {
		return err
	}
	if h.embedded != nil {
		if err := h.embedded.sanity(ctx, "bench:sanity", "embedded"); err != nil {
			return err
		}
	}
	if err := h.store.sanity(ctx, redisKey("bench:sanity")); err != nil {
		return err
	}
	hotOwner, err := h.store.owner(ctx, redisKey(HotKey))
	if err != nil {
		return err
	}
	h.logf("sanity: RL.TAKE and EVALSHA answer; script %s on %d primaries; %s is on %s; redis pids %v; sluice pid %d%s",
		h.store.sha, len(h.store.primaries), redisKey(HotKey), hotOwner, h.store.pids, h.front.pid, h.embeddedPid())
	if slices.Contains(h.cfg.Scenarios, HotLease) {
		leaseOwner, err := h.store.owner(ctx, redisKey(HotLeaseKey))
		if err != nil {
			return err
		}
		if leaseOwner != hotOwner {
			return fmt.Errorf("bench: %s is on %s, but %s on %s: the hot-lease sides would use different shards", redisKey(HotLeaseKey), leaseOwner, redisKey(HotKey), hotOwner)
		}
	}

	if w := h.cfg.Warmup; w > 0 {
		for _, side := range h.sides() {
			in, err := h.invocation(side, Uniform, 1, hotOwner)
			if err != nil {
				return err
			}
			in.Requests = w
			r, _, err := runBenchmark(ctx, h.bin, in, h.cfg.RunTimeout)
			if err != nil {
				return err
			}
			h.logf("warm-up %-6s %d requests: %.0f req/s", side, w, r.RPS)
		}
	}

	total := h.cfg.Rounds * len(h.cfg.Scenarios) * len(h.cfg.Pipelines) * len(h.sides())
	for round := 1; round <= h.cfg.Rounds; round++ {
		for _, sc := range h.cfg.Scenarios {
			for _, p := range h.cfg.Pipelines {
				for _, side := range h.sides() {
					in, err := h.invocation(side, sc, p, hotOwner)
					if err != nil {
						return err
					}
					run, err := h.runOne(ctx, in, round, sc, side, hotOwner)
					if err != nil {
						return err
					}
					rep.Runs = append(rep.Runs, run)
					h.logf("[%d/%d] round %d %-7s P%-3d %-8s %9.0f req/s  p50 %.3f ms  p99 %.3f ms  redis %s µs/decision (primaries %s)  sluice %s µs/decision  %s commands/pipeline  %s decisions/call  %s",
						len(rep.Runs), total, round, sc, p, side, run.RPS, run.P50, run.P99,
						fixed(run.RedisCPU, 1), fixed(run.PrimaryCPU, 1), fixed(run.SluiceCPU, 1), fixed(run.PerPipeline, 1), fixed(run.PerCall, 1), run.Elapsed.Round(10*time.Millisecond))
				}
			}
		}
	}
	return nil
}

// invocation is the redis-benchmark command line of one run.
func (h *harness) invocation(side Side, sc Scenario, pipeline int, hotOwner string) (invocation, error) {
	in := invocation{
		Clients:  h.cfg.Clients,
		Requests: h.cfg.requests(pipeline),
		Pipeline: pipeline,
		Threads:  h.cfg.Threads,
	}
	if sc == Uniform {
		in.Keyspace = h.cfg.Keyspace
	}
	var addr string
	switch {
	case side == Sluice || side == Embedded:
		addr = h.front.addr
		if side == Embedded {
			addr = h.embedded.addr
		}
		key := HotKey
		switch sc {
		case Uniform:
			key = "key:__rand_int__"
		case HotLease:
			key = HotLeaseKey
		}
		in.Command = []string{"RL.TAKE", key, "1"}
	case sc == Uniform:
		// In cluster mode redis-benchmark replaces "{tag}" with a hash tag
		// of a slot that the client's node owns, so each client's keys go
		// to its node with no redirection.
		in.Cluster = true
		addr = h.store.seeds[0]
		in.Command = append([]string{"EVALSHA", h.store.sha, "1", cluster.Prefix + "{tag}:__rand_int__"}, h.store.args()...)
	default:
		addr = hotOwner
		in.Command = append([]string{"EVALSHA", h.store.sha, "1", redisKey(HotKey)}, h.store.args()...)
	}
	var err error
	in.Host, in.Port, err = splitAddr(addr)
	return in, err
}

// runOne runs one invocation with the counters read around it, and checks
// that the run did what it claims.
func (h *harness) runOne(ctx context.Context, in invocation, round int, sc Scenario, side Side, hotOwner string) (Trial, error) {
	run := Trial{Round: round, Scenario: sc, Pipeline: in.Pipeline, Side: side, Requests: in.Requests,
		Command: in.String(), RedisCPU: math.NaN(), PrimaryCPU: math.NaN(), SluiceCPU: math.NaN(), PerCall: math.NaN(), PerPipeline: math.NaN()}
	// The sluice whose counters and CPU the run reads: the embedded one on
	// the embedded side, else the one in front of the cluster, whose
	// counters must not move during a direct run.
	f := h.front
	if side == Embedded {
		f = h.embedded
	}

	before, err := h.counters(ctx, f, false)
	if err != nil {
		return run, err
	}
	res, took, err := runBenchmark(ctx, h.bin, in, h.cfg.RunTimeout)
	if err != nil {
		return run, err
	}
	run.Result, run.Elapsed = res, took
	after, err := h.counters(ctx, f, true)
	if err != nil {
		return run, err
	}
	if before.redisErr == nil && after.redisErr == nil && side != Embedded {
		run.RedisCPU = h.perDecision(after.redisTicks-before.redisTicks, in.Requests)
	}
	if before.primaryErr == nil && after.primaryErr == nil && side != Embedded {
		run.PrimaryCPU = h.perDecision(after.primaryTicks-before.primaryTicks, in.Requests)
	}
	fBefore, fAfter := before.front, after.front
	if side == Sluice {
		run.PerCall = ratio(float64(fAfter.nodes.decisions-fBefore.nodes.decisions), float64(fAfter.nodes.commands-fBefore.nodes.commands))
		run.PerPipeline = ratio(float64(fAfter.nodes.commands-fBefore.nodes.commands), float64(fAfter.nodes.pipelines-fBefore.nodes.pipelines))
	}
	if side != Direct && before.sluiceErr == nil && after.sluiceErr == nil {
		run.SluiceCPU = h.perDecision(after.sluiceTicks-before.sluiceTicks, in.Requests)
	}

	var calls, failed, redisErrors int64
	for _, addr := range h.store.primaries {
		b, a := before.nodes[addr], after.nodes[addr]
		run.ScriptCalls = append(run.ScriptCalls, a.scriptCalls-b.scriptCalls)
		calls += a.scriptCalls - b.scriptCalls
		failed += a.failed - b.failed
		redisErrors += a.errors - b.errors
	}
	// byStore counts the decisions of the side's own path: the store's,
	// or in process on the embedded side.
	byStore := fAfter.byStore - fBefore.byStore
	if side == Embedded {
		byStore = fAfter.byEmbedded - fBefore.byEmbedded
	}
	if side != Direct {
		run.ByLease = fAfter.byLease - fBefore.byLease
	}
	fallback := (fAfter.decisions - fBefore.decisions) - byStore - run.ByLease
	run.Errors = redisErrors + (fAfter.errorReplies - fBefore.errorReplies) + max(0, fallback)
	return run, h.check(run, calls, failed, redisErrors, byStore, fallback, hotOwner)
}

// sides are the sides each cell runs, in order.
func (h *harness) sides() []Side {
	if h.embedded == nil {
		return []Side{Sluice, Direct}
	}
	return sides
}

// embeddedPid is "; embedded sluice pid N" for the sanity line, or "".
func (h *harness) embeddedPid() string {
	if h.embedded == nil {
		return ""
	}
	return fmt.Sprintf("; embedded sluice pid %d", h.embedded.pid)
}

// check fails a run whose counters say it measured something else than it
// claims: error replies, fallback answers, or work missing on a shard. A
// sluice hot-lease run is decided by the store until the key is hot and by
// leased tokens after, so its store and lease decisions must add up to the
// requests, and the shard runs a script per claim, not per request. Direct
// runs one script a request; sluice decides a node's batch in one call, so
// for it the store's count of decisions is the evidence. On the embedded
// side byStore is the count decided in process, which must be every
// request (with the leased ones for hot-lease).
func (h *harness) check(run Trial, calls, failed, redisErrors, byStore, fallback int64, hotOwner string) error {
	n := int64(run.Requests)
	where := fmt.Sprintf("bench: round %d %s P%d %s", run.Round, run.Scenario, run.Pipeline, run.Side)
	viaSluice := run.Side != Direct
	path := "the store"
	if run.Side == Embedded {
		path = "the embedded store"
	}
	leased := viaSluice && run.Scenario == HotLease
	switch {
	case failed > 0 || redisErrors > 0:
		return fmt.Errorf("%s: Redis answered %d error replies (%d failed script calls)", where, redisErrors, failed)
	case run.Errors > 0 && viaSluice:
		return fmt.Errorf("%s: sluice answered %d requests with an error or a fallback (%d decided by %s, %d by lease, %d fallback); see its INFO", where, run.Errors, byStore, path, run.ByLease, fallback)
	case leased && byStore+run.ByLease != n:
		return fmt.Errorf("%s: sluice decided %d of %d requests by %s and %d by lease, want them to add up to the requests", where, byStore, n, path, run.ByLease)
	case leased:
		return nil
	case viaSluice && byStore < n:
		return fmt.Errorf("%s: sluice decided %d of %d requests by %s", where, byStore, n, path)
	case viaSluice:
		return nil // the batch script decides many requests a call: sluice's count is the evidence
	case calls < n:
		return fmt.Errorf("%s: the primaries ran the script %d times for %d requests", where, calls, n)
	}
	if run.Side == Direct && run.Scenario == Uniform {
		for i, c := range run.ScriptCalls {
			if c == 0 {
				return fmt.Errorf("%s: primary %s ran no script: redis-benchmark --cluster did not spread the keys", where, h.store.primaries[i])
			}
		}
	}
	if run.Scenario == Hot || run.Scenario == HotLease {
		i := slices.Index(h.store.primaries, hotOwner)
		if i < 0 || run.ScriptCalls[i] < n {
			return fmt.Errorf("%s: the owner %s of the hot key ran the script %d times for %d requests", where, hotOwner, run.ScriptCalls[max(i, 0)], n)
		}
	}
	return nil
}

// counters are what runOne reads before and after a run: the primaries'
// counters, sluice's, and the CPU of both (an error where it cannot be
// read here). The CPU is read next to the run, so that the INFO calls
// that read the counters do not count: last before it, first after it.
type counters struct {
	nodes                                 map[string]nodeStats
	front                                 frontStats
	redisTicks, primaryTicks, sluiceTicks uint64
	redisErr, primaryErr, sluiceErr       error
}

func (h *harness) counters(ctx context.Context, f *front, after bool) (counters, error) {
	var c counters
	cpu := func() {
		c.redisTicks, c.redisErr = h.redisTicks(h.store.pids)
		c.primaryTicks, c.primaryErr = h.redisTicks(h.store.primPids)
		c.sluiceTicks, c.sluiceErr = sluiceTicks(f)
	}
	if after {
		cpu()
	}
	var err error
	if c.nodes, err = h.store.stats(ctx); err != nil {
		return c, err
	}
	if c.front, err = f.stats(ctx); err != nil {
		return c, err
	}
	if !after {
		cpu()
	}
	return c, nil
}

func (h *harness) redisTicks(pids []int) (uint64, error) {
	if pids == nil {
		return 0, errors.ErrUnsupported
	}
	return cpuTicks(pids)
}

func sluiceTicks(f *front) (uint64, error) {
	if f.pid == 0 {
		return 0, errors.ErrUnsupported
	}
	return cpuTicks([]int{f.pid})
}

// perDecision converts clock ticks to µs per request.
func (h *harness) perDecision(ticks uint64, requests int) float64 {
	return float64(ticks) * 1e6 / float64(h.ticks) / float64(requests)
}

// machine describes where the benchmark ran.
func machine(now time.Time, sluiceVersion, redisVersion, benchVersion string) Machine {
	m := Machine{
		Sluice:    sluiceVersion,
		CPUs:      runtime.NumCPU(),
		Nproc:     "n/a",
		Go:        runtime.Version(),
		OS:        runtime.GOOS + "/" + runtime.GOARCH,
		Redis:     redisVersion,
		Benchmark: benchVersion,
		Date:      now,
	}
	if out, err := exec.Command("nproc").Output(); err == nil {
		m.Nproc = strings.TrimSpace(string(out))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// front is the sluice under test, seen through its RESP port.
type front struct {
	c       *redis.Client
	addr    string
	pid     int    // 0 when its CPU cannot be read here
	version string // sluice_version of INFO
}

func newFront(ctx context.Context, addr string) (*front, error) {
	f := &front{addr: addr, c: redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true, Protocol: 2})}
	text, err := f.c.Do(ctx, "INFO", "server").Text()
	if err != nil {
		_ = f.c.Close()
		return nil, fmt.Errorf("bench: INFO on sluice %s: %w", addr, err)
	}
	fields := infoFields(text)
	if pid, err := strconv.Atoi(fields["process_id"]); err == nil && isLoopback(addr) && procName(pid) != "" {
		f.pid = pid
	}
	f.version = fields["sluice_version"]
	return f, nil
}

func (f *front) close() { _ = f.c.Close() }

// sanity takes one token of key and checks the reply: 6 elements, the
// first five integers, admitted, decided by by ("store", "embedded").
func (f *front) sanity(ctx context.Context, key, by string) error {
	v, err := f.c.Do(ctx, "RL.TAKE", key, 1).Slice()
	if err != nil {
		return fmt.Errorf("bench: RL.TAKE %s on sluice %s: %w", key, f.addr, err)
	}
	if len(v) != 6 {
		return fmt.Errorf("bench: RL.TAKE %s replied %d elements, want 6: %v", key, len(v), v)
	}
	for i := range 5 {
		if _, ok := v[i].(int64); !ok {
			return fmt.Errorf("bench: RL.TAKE %s: element %d is %T, want an integer: %v", key, i+1, v[i], v)
		}
	}
	if v[0] != int64(1) || v[5] != by {
		return fmt.Errorf("bench: RL.TAKE %s on sluice %s = %v: want admitted (1) and decided by %s; the benchmark needs a policy that admits everything and a reachable cluster", key, f.addr, v, by)
	}
	return nil
}

// frontStats are sluice's counters that a run checks.
type frontStats struct {
	decisions, byStore, byEmbedded, byLease, byDeny, errorReplies int64
	// leaseHeld is the tokens sluice's leases hold (claimed, neither
	// spent nor returned), when every take costs 1 as in the benchmarks.
	leaseHeld int64
	nodes     nodeTotals
}

var errNoStats = errors.New("bench: sluice INFO lacks decisions or decided_by_store")

func (f *front) stats(ctx context.Context) (frontStats, error) {
	text, err := f.c.Do(ctx, "INFO").Text()
	if err != nil {
		return frontStats{}, fmt.Errorf("bench: INFO on sluice: %w", err)
	}
	m := infoFields(text)
	var st frontStats
	var err1, err2 error
	st.decisions, err1 = strconv.ParseInt(m["decisions"], 10, 64)
	st.byStore, err2 = strconv.ParseInt(m["decided_by_store"], 10, 64)
	if err1 != nil || err2 != nil {
		return frontStats{}, errNoStats
	}
	st.errorReplies, _ = strconv.ParseInt(m["total_error_replies"], 10, 64)
	st.byLease, _ = strconv.ParseInt(m["decided_by_lease"], 10, 64)       // 0 when absent
	st.byEmbedded, _ = strconv.ParseInt(m["decided_by_embedded"], 10, 64) // 0 when absent
	st.byDeny, _ = strconv.ParseInt(m["decided_by_deny_cache"], 10, 64)   // 0 when absent
	claimed, _ := strconv.ParseInt(m["lease_tokens_claimed"], 10, 64)
	hits, _ := strconv.ParseInt(m["lease_hits"], 10, 64)
	returned, _ := strconv.ParseInt(m["lease_tokens_returned"], 10, 64)
	st.leaseHeld = claimed - hits - returned
	st.nodes = nodeCalls(text)
	return st, nil
}

// nodeTotals are the sums over the store's nodes of sluice's INFO node_…
// lines: the pipelines sent, the commands (script calls) in them, and the
// decisions those calls made.
type nodeTotals struct{ pipelines, commands, decisions int64 }

// nodeCalls sums the node_<addr>:breaker=…,pipelines=P,commands=N,decisions=M,…
// lines of sluice's INFO, one a node (not through infoFields, which keys a
// line by the text before its first ':', the host).
func nodeCalls(text string) nodeTotals {
	var t nodeTotals
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, "node_") {
			continue
		}
		for f := range strings.SplitSeq(strings.TrimSpace(line), ",") {
			name, val, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(val, 10, 64)
			switch name {
			case "pipelines":
				t.pipelines += n
			case "commands":
				t.commands += n
			case "decisions":
				t.decisions += n
			}
		}
	}
	return t
}
