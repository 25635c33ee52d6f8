package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The doors of RunFronts.
const (
	DoorRESP = "resp"
	DoorHTTP = "http"
	DoorGRPC = "grpc"
)

// FrontConfig configures RunFronts: each door of one sluice driven by a Go
// load generator of Clients concurrent callers, one decision in flight
// each, next to redis-benchmark's RL.TAKE through the same sluice and
// EVALSHA straight at the shards, all in one run.
type FrontConfig struct {
	Binary         string   // sluice; "" means sluiceBinary's
	Cluster        []string // seeds of a running cluster; nil starts one
	RedisBenchmark string
	Doors          []string // DoorRESP, DoorHTTP, DoorGRPC
	Clients        int      // concurrent callers per door (default 50)
	Requests       int      // per door and per redis-benchmark run (default 200,000)
	Keyspace       int      // uniform keys (default 1,000,000)
	MarkdownPath   string
	Now            func() time.Time
	// Peer, when PeerGubernator, also drives one gubernator node (its
	// HTTP API, the same callers and keys) on the same machine; when
	// PeerRatelimit, envoyproxy/ratelimit's service on the same cluster
	// with the gRPC door's generator. PeerBin is its binary ("" finds or
	// builds it, see peerBinary).
	Peer, PeerBin string
}

// FrontRow is one door's run (or redis-benchmark's).
type FrontRow struct {
	Door     string // "resp (redis-benchmark)", "http", …
	Tool     string // who drove it
	Requests int
	Elapsed  time.Duration
	RPS      float64
	P50, P99 float64 // ms
	// Store is the decisions the store made (sluice's INFO delta); the
	// direct row has none, a peer -1 (StoreNote says why).
	Store     int64
	StoreNote string
	// RedisCPU is µs of the primaries' used_cpu_sys + used_cpu_user
	// (INFO cpu) over the run per request; NaN for a peer without Redis.
	RedisCPU float64
	// ServiceCPU is µs of the serving process's utime + stime
	// (/proc/<pid>/stat: sluice's, or the peer's) over the run per
	// request; NaN for direct EVALSHA, which has none.
	ServiceCPU float64
}

// FrontReport is RunFronts' result.
type FrontReport struct {
	Config  FrontConfig
	Machine Machine
	Rows    []FrontRow
	Direct  FrontRow
	Elapsed time.Duration
}

// Ratio is row's requests/s over direct EVALSHA's.
func (rep *FrontReport) Ratio(r FrontRow) float64 { return ratio(r.RPS, rep.Direct.RPS) }

// doorRE finds the address a door logs at start: msg="http listening" addr=….
func doorRE(door string) *regexp.Regexp {
	return regexp.MustCompile(`msg="` + door + ` listening" addr=(\S+)`)
}

// RunFronts runs the doors of cfg and reports them side by side.
func RunFronts(ctx context.Context, cfg FrontConfig, progress io.Writer) (*FrontReport, error) {
	began := time.Now()
	extra, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	f, err := startFronts(ctx, cfg, extra, progress)
	if err != nil {
		return nil, err
	}
	defer f.close()
	rep := &FrontReport{Config: cfg}
	if rep.Direct, err = f.direct(ctx); err != nil {
		return nil, err
	}
	row, err := f.counted(ctx, "RL.TAKE", f.take)
	if err != nil {
		return nil, err
	}
	rep.Rows = append(rep.Rows, row)
	f.rig.logf("RL.TAKE by redis-benchmark: %.0f req/s, p50 %s ms, p99 %s ms", row.RPS, ms(row.P50), ms(row.P99))
	for _, door := range cfg.Doors {
		row, err := f.door(ctx, door)
		if err != nil {
			return nil, err
		}
		rep.Rows = append(rep.Rows, row)
		f.rig.logf("%s door: %.0f req/s, p50 %s ms, p99 %s ms", door, row.RPS, ms(row.P50), ms(row.P99))
	}
	switch cfg.Peer {
	case "":
	case PeerGubernator, PeerRatelimit:
		run := f.runGubernator
		if cfg.Peer == PeerRatelimit {
			run = f.runRatelimit
		}
		row, err := run(ctx)
		if err != nil {
			return nil, f.rig.errorf("peer %s: %w", cfg.Peer, err)
		}
		rep.Rows = append(rep.Rows, row)
		f.rig.logf("%s: %.0f req/s, p50 %s ms, p99 %s ms", cfg.Peer, row.RPS, ms(row.P50), ms(row.P99))
	default:
		return nil, fmt.Errorf("bench: --peer %q: only %s or %s", cfg.Peer, PeerGubernator, PeerRatelimit)
	}
	rep.Machine = f.rig.machine(cfg.Now(), f.tool)
	rep.Elapsed = time.Since(began)
	return rep, nil
}

// resolve applies the defaults of cfg's zero fields and checks its doors;
// extra are the flags that open them on the sluice child.
func (cfg *FrontConfig) resolve() (extra []string, err error) {
	orDefault(&cfg.Clients, DefaultClients)
	orDefault(&cfg.Requests, DefaultRequests)
	orDefault(&cfg.Keyspace, DefaultKeyspace)
	if cfg.RedisBenchmark == "" {
		cfg.RedisBenchmark = "redis-benchmark"
	}
	orNow(&cfg.Now)
	for _, d := range cfg.Doors {
		switch {
		case d == DoorRESP:
		case dialers[d] == nil || d == PeerGubernator:
			return nil, fmt.Errorf("bench: --front %q: this build drives %s", d, strings.Join(doorNames(), ", "))
		default:
			extra = append(extra, "--"+d, "127.0.0.1:0")
		}
	}
	return extra, nil
}

// frontRun is what RunFronts runs on: the rig, the store, the one sluice
// child with its doors open and a client of its RESP door.
type frontRun struct {
	cfg  FrontConfig
	rig  *rig
	st   *store
	ch   *child
	sl   *redis.Client
	tool string // the report's machine line
}

// startFronts sets up the rig (the cluster unless cfg names one), opens
// the store and starts the sluice child with the doors of extra. The
// caller must call close.
func startFronts(ctx context.Context, cfg FrontConfig, extra []string, progress io.Writer) (*frontRun, error) {
	bucket, err := benchBucket()
	if err != nil {
		return nil, err
	}
	f := &frontRun{cfg: cfg, tool: "a Go load generator (one decision in flight per caller) and " + benchmarkVersion(cfg.RedisBenchmark)}
	if f.rig, err = newRig(ctx, rigSpec{name: "bench front", binary: cfg.Binary, cluster: cfg.Cluster, policy: Policy, now: cfg.Now, tool: f.tool}, progress); err != nil {
		return nil, err
	}
	if f.st, err = openStore(ctx, f.rig.seeds, bucket); err != nil {
		f.close()
		return nil, err
	}
	if f.sl, err = f.rig.startOne(ctx, f.rig.seeds, f.rig.policy, redis.Options{}, extra...); err != nil {
		f.close()
		return nil, err
	}
	f.ch = f.rig.children[len(f.rig.children)-1]
	return f, nil
}

// close stops what startFronts started, by pid.
func (f *frontRun) close() {
	if f.st != nil {
		f.st.close()
	}
	f.rig.close()
}

// direct is redis-benchmark sending EVALSHA straight at the shards.
func (f *frontRun) direct(ctx context.Context) (FrontRow, error) {
	direct, err := f.st.directUniform(f.cfg.Keyspace)
	if err != nil {
		return FrontRow{}, err
	}
	direct.Clients, direct.Requests = f.cfg.Clients, f.cfg.Requests
	cpu, err := f.st.primaryCPU(ctx)
	if err != nil {
		return FrontRow{}, err
	}
	res, took, err := runBenchmark(ctx, f.cfg.RedisBenchmark, direct, DefaultRunTimeout)
	if err != nil {
		return FrontRow{}, f.rig.errorf("direct EVALSHA: %w", err)
	}
	after, err := f.st.primaryCPU(ctx)
	if err != nil {
		return FrontRow{}, err
	}
	f.rig.logf("direct EVALSHA: %.0f req/s, p50 %s ms, p99 %s ms", res.RPS, ms(res.P50), ms(res.P99))
	return FrontRow{Door: "direct EVALSHA", Tool: "redis-benchmark", Requests: f.cfg.Requests, Elapsed: took, RPS: res.RPS, P50: res.P50, P99: res.P99,
		RedisCPU: (after - cpu) * 1e6 / float64(f.cfg.Requests), ServiceCPU: math.NaN()}, nil
}

// take is redis-benchmark sending RL.TAKE through the RESP door.
func (f *frontRun) take(ctx context.Context) (FrontRow, error) {
	host, port, err := splitAddr(f.ch.addr)
	if err != nil {
		return FrontRow{}, err
	}
	take := invocation{Host: host, Port: port, Clients: f.cfg.Clients, Requests: f.cfg.Requests, Pipeline: 1, Keyspace: f.cfg.Keyspace,
		Command: []string{"RL.TAKE", "key:__rand_int__", "1"}}
	res, took, err := runBenchmark(ctx, f.cfg.RedisBenchmark, take, DefaultRunTimeout)
	if err != nil {
		return FrontRow{}, err
	}
	return FrontRow{Door: "resp (RL.TAKE)", Tool: "redis-benchmark", Requests: f.cfg.Requests, Elapsed: took, RPS: res.RPS, P50: res.P50, P99: res.P99}, nil
}

// door drives one door with the Go load generator; the store must have
// decided every request.
func (f *frontRun) door(ctx context.Context, door string) (FrontRow, error) {
	addr := f.ch.addr
	if door != DoorRESP {
		var err error
		if addr, err = f.ch.logged(doorRE(door), defaultStartupTimeout); err != nil {
			return FrontRow{}, err
		}
	}
	if err := loopbackOnly(addr); err != nil {
		return FrontRow{}, err
	}
	row, err := f.counted(ctx, door+" door", func(ctx context.Context) (FrontRow, error) { return driveDoor(ctx, door, addr, f.cfg) })
	if err != nil {
		return FrontRow{}, err
	}
	if row.Store < int64(row.Requests) {
		return FrontRow{}, f.rig.errorf("%s door: the store decided %d of %d requests", door, row.Store, row.Requests)
	}
	return row, nil
}

// counted runs drive with sluice's decided_by_store read around it (the
// difference the row's Store) and what measured reads; what names the run
// in drive's error.
func (f *frontRun) counted(ctx context.Context, what string, drive func(context.Context) (FrontRow, error)) (FrontRow, error) {
	before, err := storeDecisions(ctx, f.sl)
	if err != nil {
		return FrontRow{}, err
	}
	row, err := f.measured(ctx, f.ch.cmd.Process.Pid, drive)
	if err != nil {
		return FrontRow{}, f.rig.errorf("%s: %w", what, err)
	}
	after, err := storeDecisions(ctx, f.sl)
	if err != nil {
		return FrontRow{}, err
	}
	row.Store = after - before
	return row, nil
}

// measured runs drive with the CPU of the process pid and of the
// primaries read around it, per request the row's ServiceCPU and
// RedisCPU.
func (f *frontRun) measured(ctx context.Context, pid int, drive func(context.Context) (FrontRow, error)) (FrontRow, error) {
	cpu, err := f.st.primaryCPU(ctx)
	if err != nil {
		return FrontRow{}, err
	}
	ticks, err := cpuTicks([]int{pid})
	if err != nil {
		return FrontRow{}, err
	}
	row, err := drive(ctx)
	if err != nil {
		return FrontRow{}, err
	}
	ticksAfter, err := cpuTicks([]int{pid})
	if err != nil {
		return FrontRow{}, err
	}
	cpuAfter, err := f.st.primaryCPU(ctx)
	if err != nil {
		return FrontRow{}, err
	}
	n := float64(row.Requests)
	row.RedisCPU = (cpuAfter - cpu) * 1e6 / n
	row.ServiceCPU = float64(ticksAfter-ticks) * 1e6 / float64(clockTicks()) / n
	return row, nil
}

// runGubernator starts gubernator, drives it like a door, its CPU read
// around the run, and stops it.
func (f *frontRun) runGubernator(ctx context.Context) (FrontRow, error) {
	bin, err := gubernatorBinary(ctx, f.cfg.PeerBin, f.rig.logf)
	if err != nil {
		return FrontRow{}, err
	}
	addr, p, err := startGubernator(ctx, bin)
	if err != nil {
		return FrontRow{}, err
	}
	defer p.stop()
	f.rig.logf("gubernator %s serving HTTP on %s", bin, addr)
	row, err := f.measured(ctx, p.pid, func(ctx context.Context) (FrontRow, error) { return driveDoor(ctx, PeerGubernator, addr, f.cfg) })
	row.Door, row.Tool, row.Store, row.StoreNote, row.RedisCPU = "gubernator v2.13.0 (peer, one node, limits in its memory)", "Go", -1, "— (its own memory)", math.NaN()
	return row, err
}

func doorNames() []string {
	var out []string
	for d := range dialers {
		if d != PeerGubernator {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// storeDecisions reads sluice's decided_by_store.
func storeDecisions(ctx context.Context, c *redis.Client) (int64, error) {
	text, err := c.Do(ctx, "INFO", "sluice").Text()
	if err != nil {
		return 0, fmt.Errorf("INFO on sluice: %w", err)
	}
	return strconv.ParseInt(infoFields(text)["decided_by_store"], 10, 64)
}

// loopbackOnly refuses a door address that is not on loopback: the load
// generator sends traffic nowhere else.
func loopbackOnly(addr string) error {
	if !isLoopback(addr) {
		return fmt.Errorf("bench: %s is not a loopback address", addr)
	}
	return nil
}

// Markdown is the report as a markdown table, requests/s as a ratio of
// direct EVALSHA's.
func (rep *FrontReport) Markdown() string { return render("fronts", rep) }

// StoreCell is the row's decisions by the store; a peer has its own
// memory or keys instead.
func (r FrontRow) StoreCell() string {
	if r.Store < 0 {
		return r.StoreNote
	}
	return thousands(float64(r.Store))
}
