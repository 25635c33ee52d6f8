package bench

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// The command lines of `sluice-lab bench` and `sluice-lab <experiment>`, as
// flags declared on a flag set the command owns: cmd/sluice-lab makes the set,
// parses it and prints. Here are every experiment's usage text and flags,
// one Lab function each (labHot … labRegions), each flag defaulting to the
// experiment's config default, and BenchFlags for `sluice-lab bench`: the
// surface the README documents, in one place.

// Markdowner is what an experiment returns: a report with its text.
type Markdowner interface{ Markdown() string }

// LabFunc runs an experiment whose flags are parsed; progress lines go to
// progress.
type LabFunc func(ctx context.Context, progress io.Writer) (Markdowner, error)

// Lab is one experiment of `sluice-lab` as its command line sees it: its
// name, one line for the list of commands (About), the paragraph of its -h
// (Usage) and Flags, which declares the experiment's own flags on fs, each
// with the experiment's default as its default, and returns the run for
// once fs is parsed. --out, which every experiment has, is the command's.
type Lab struct {
	Name  string
	About string
	Usage string
	Flags func(fs *flag.FlagSet) (LabFunc, error)
}

// Labs are the experiments of `sluice-lab`, in the order its usage lists
// them.
func Labs() []Lab {
	return []Lab{labHot(), labSoak(), labGlobal(), labPartition(), labRestart(), labLatency(), labOverload(), labRegions()}
}

// rigFlags is the Flags of an experiment that RunLab runs: rep's defaults
// applied (a config RunLab would refuse fails here), then flags declares
// the experiment's own on fs, defaulting to rep's config.
func rigFlags[R Experiment](rep R, flags func()) (LabFunc, error) {
	if err := Defaults(rep); err != nil {
		return nil, err
	}
	flags()
	return func(ctx context.Context, progress io.Writer) (Markdowner, error) {
		rep, err := RunLab(ctx, rep, progress)
		if err != nil {
			return nil, err
		}
		return rep, nil
	}, nil
}

// clusterSeeds adds --cluster, the seed nodes of a running cluster, to the
// experiments that can use one.
func clusterSeeds(fs *flag.FlagSet, seeds *[]string) {
	fs.Func("cluster", "seed nodes `host:port,…` of a running Redis Cluster (default: start one)", func(s string) error {
		*seeds = strings.Split(s, ",")
		return nil
	})
}

// loadFlags adds the flags of the load that several experiments share,
// each with its default the value it points at; instances may be nil. per
// names what --max-requests counts for: "row", "event".
func loadFlags(fs *flag.FlagSet, per string, maxRequests *int64, workers, instances *int) {
	fs.Int64Var(maxRequests, "max-requests", *maxRequests, "at most this many requests per "+per)
	fs.IntVar(workers, "workers", *workers, "load goroutines per sluice process (and key, where there are several), one request or pipeline in flight each")
	if instances != nil {
		fs.IntVar(instances, "instances", *instances, "sluice processes")
	}
}

// intList parses "1,16".
func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// commaInts is a flag's default list: 50,200,1000.
func commaInts(v []int) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

// labHot is `sluice-lab hot`.
func labHot() Lab {
	return Lab{Name: "hot", About: "one hot key through two sluice instances, once per hot-key mode (strict, split, lease)",
		Usage: `The hot-tenant experiment: one key (hot:tenant) at the machine's top rate
through two sluice instances in front of one Redis Cluster, once per hot-key
mode, with the same policy otherwise (limit 1000, rate 500/1s,
on_store_error closed, hot threshold 1000 requests/s per instance, split 8).
Prints requests/s, p99, admitted against the budget (limit + rate × elapsed)
and the decided_by counts as a markdown table. Without --cluster it starts a
local 3+3 Redis Cluster (needs redis-server and redis-cli on PATH); it starts
the sluice binary as 'sluice serve' for each instance and stops it after
each mode.
`, Flags: func(fs *flag.FlagSet) (LabFunc, error) {
			rep := &HotLabReport{}
			c := &rep.Config
			return rigFlags(rep, func() {
				fs.Func("modes", "hot-key `modes` to run, in order: strict (hot mode off), split, lease (default strict,split,lease)", func(s string) error {
					c.Modes = nil
					for _, m := range strings.Split(s, ",") {
						c.Modes = append(c.Modes, HotLabMode(strings.TrimSpace(m)))
					}
					return nil
				})
				loadFlags(fs, "mode", &c.MaxRequests, &c.Workers, &c.Instances)
				fs.DurationVar(&c.Duration, "duration", c.Duration, "load per mode")
				fs.IntVar(&c.Pipeline, "pipeline", c.Pipeline, "RL.TAKE commands per pipeline")
				fs.IntVar(&c.Split, "split", c.Split, "sub-buckets of the split mode")
				clusterSeeds(fs, &c.Cluster)
			})
		}}
}

// labSoak is `sluice-lab soak`.
func labSoak() Lab {
	return Lab{Name: "soak", About: "minutes of mixed load and faults; sluice's goroutines, RSS and open files",
		Usage: `Mixed keys (a hot leased key and keys of every on_store_error) under load
for --duration against a local 3+3 Redis Cluster, while faults are injected
in turn every --fault: SCRIPT FLUSH on every node, a primary paused for a
second, a flood of 500 connects and disconnects. Samples sluice's
goroutines, RSS and open file descriptors every --sample, which must end
where they started once the load is gone, and prints them as a table.
`, Flags: func(fs *flag.FlagSet) (LabFunc, error) {
			var cfg SoakConfig
			fs.DurationVar(&cfg.Duration, "duration", DefaultSoakDuration, "how long the load runs")
			fs.DurationVar(&cfg.Sample, "sample", DefaultSoakSample, "between samples")
			fs.DurationVar(&cfg.Fault, "fault", DefaultSoakFault, "between faults")
			fs.IntVar(&cfg.Workers, "workers", DefaultSoakWorkers, "client goroutines")
			return func(ctx context.Context, progress io.Writer) (Markdowner, error) {
				rep, err := Soak(ctx, cfg, progress)
				if err != nil {
					return nil, err
				}
				return rep, nil
			}, nil
		}}
}

// labGlobal is `sluice-lab global`.
func labGlobal() Lab {
	return Lab{Name: "global", About: "is the limit global? 1 sluice, 2 sluices on the cluster, 2 embedded sluices",
		Usage: `The seed lab's experiment 1: one tenant key, a token bucket of capacity 100
refilled 50/s, through 1 sluice process in front of the Redis Cluster, 2
processes in front of it (one shared bucket) and 2 processes in embedded
mode (each its own in-process bucket), for --duration each. Prints allowed,
rejected, expected (100 + 50 × elapsed, one shared bucket) and a verdict
computed from their ratio as a markdown table. Without --cluster it starts
a local 3+3 Redis Cluster (redis-server and redis-cli on PATH); it starts
the sluice binary as 'sluice serve' for each process.
`, Flags: func(fs *flag.FlagSet) (LabFunc, error) {
			rep := &GlobalLabReport{}
			c := &rep.Config
			return rigFlags(rep, func() {
				clusterSeeds(fs, &c.Cluster)
				fs.DurationVar(&c.Duration, "duration", c.Duration, "load per row")
				loadFlags(fs, "row", &c.MaxRequests, &c.Workers, nil)
			})
		}}
}

// labPartition is `sluice-lab partition`.
func labPartition() Lab {
	return Lab{Name: "partition", About: "the owning primary frozen (SIGSTOP) under load, once per on_store_error",
		Usage: `The seed lab's experiment 2: 2 sluice processes in front of a local 3+3
Redis Cluster (cluster-node-timeout 60s, so nothing fails over); the primary
owning three keys (on_store_error open, closed, local with local_share 0.5;
capacity 100, refill 50/s) is stopped with SIGSTOP for --pause while the
keys are sent RL.TAKE through both processes, then resumed with SIGCONT.
Prints allowed, rejected, error replies, slowest reply, decided_by, the time
to strict decisions again and a verdict per policy. It always starts its
own cluster (it must signal a node).
`, Flags: func(fs *flag.FlagSet) (LabFunc, error) {
			rep := &PartitionLabReport{}
			c := &rep.Config
			return rigFlags(rep, func() {
				fs.DurationVar(&c.Pause, "pause", c.Pause, "how long the primary stays stopped, under load")
				fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "the policy file's store deadline")
				loadFlags(fs, "policy", &c.MaxRequests, &c.Workers, &c.Instances)
			})
		}}
}

// labRestart is `sluice-lab restart`.
func labRestart() Lab {
	return Lab{Name: "restart", About: "SCRIPT FLUSH, a restart, a failover of the owning primary under load",
		Usage: `The seed lab's "survives a Redis restart": 2 sluice processes in front of a
local 3+3 Redis Cluster decide one key while its primary meets, in turn,
SCRIPT FLUSH; SIGKILL and a restart --down later with no data and no scripts
(failover held off); SIGKILL with its replica promoted (cluster-node-timeout
--node-timeout). Prints per event the requests until decisions are strict
again, error replies (there must be none), NOSCRIPT replies and EVAL reloads
on the owner, the time to strict decisions and decided_by. It always starts
its own cluster (it must kill a node).
`, Flags: func(fs *flag.FlagSet) (LabFunc, error) {
			rep := &RestartLabReport{}
			c := &rep.Config
			return rigFlags(rep, func() {
				loadFlags(fs, "event", &c.MaxRequests, &c.Workers, &c.Instances)
				fs.DurationVar(&c.Down, "down", c.Down, "how long the killed primary stays down before its restart")
				fs.DurationVar(&c.Window, "window", c.Window, "the least time the load runs after each event")
				fs.DurationVar(&c.NodeTimeout, "node-timeout", c.NodeTimeout, "cluster-node-timeout for the failover")
				fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "the policy file's store deadline")
			})
		}}
}

// labLatency is `sluice-lab latency`.
func labLatency() Lab {
	return Lab{Name: "latency", About: "p50/p99 of one decision: in process, embedded, through the cluster, EVALSHA",
		Usage: `The seed lab's latency table: one client, one decision at a time, --samples
per path: the Go token bucket in this process, RL.TAKE through sluice in
embedded mode, RL.TAKE through sluice in front of the Redis Cluster, and
EVALSHA of sluice's script straight to the primary that owns the key.
Each path has a key of its own under a bucket the run never exhausts
(capacity: warm-up + --samples; hot-key mode off), so every decision is
the path's own: nothing is refused, so the deny cache never answers.
Prints p50 and p99 per path with what decided them (the replies'
decided_by), and marks a row whose own path (embedded, store) decided
fewer than 99 % of its decisions. Without --cluster it starts a local 3+3
Redis Cluster.
`, Flags: func(fs *flag.FlagSet) (LabFunc, error) {
			rep := &LatencyLabReport{}
			c := &rep.Config
			return rigFlags(rep, func() {
				clusterSeeds(fs, &c.Cluster)
				fs.IntVar(&c.Samples, "samples", c.Samples, fmt.Sprintf("timed decisions per path (at most %d)", MaxLatencyLabSamples))
			})
		}}
}

// labOverload is `sluice-lab overload`.
func labOverload() Lab {
	return Lab{Name: "overload", About: "50 → 5,000 redis-benchmark clients through one sluice and straight at the shards; one tenant in the surge",
		Usage: `A surge is not an outage: one sluice process (policy timeout --timeout) in
front of a Redis Cluster, every node up, and redis-benchmark with uniform
keys (RL.TAKE key:__rand_int__ 1) at each of --clients, then the same
script by EVALSHA straight at the shards (--cluster). Prints per count and
side requests/s, p50/p99 and, for sluice, the share decided by the store, at
the door by overload and by the failure policy, and the breaker openings;
then one tenant key (limit 100, rate 50/s, on_store_error open) at each of
--tenant-clients: admitted against the budget (limit + rate × window) and
the local share. Every client must connect (needs ulimit -n above the
largest count). Without --cluster it starts a local 3+3 Redis Cluster
(redis-server, redis-cli and redis-benchmark on PATH).
`, Flags: func(fs *flag.FlagSet) (LabFunc, error) {
			rep := &OverloadLabReport{}
			c := &rep.Config
			return rigFlags(rep, func() {
				for _, l := range []struct {
					name string
					dst  *[]int
				}{{"clients", &c.Clients}, {"tenant-clients", &c.TenantClients}} {
					fs.Func(l.name, fmt.Sprintf("client `counts`, in order (default %s)", commaInts(*l.dst)), func(s string) error {
						n, err := intList(s)
						*l.dst = n
						return err
					})
				}
				fs.IntVar(&c.Requests, "requests", c.Requests, "redis-benchmark -n of every step and side")
				fs.IntVar(&c.Warmup, "warmup", c.Warmup, "requests through sluice before the first step")
				fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "the policy file's store deadline")
				fs.IntVar(&c.Keyspace, "keyspace", c.Keyspace, "redis-benchmark -r of the uniform steps")
				clusterSeeds(fs, &c.Cluster)
			})
		}}
}

// labRegions is `sluice-lab regions`.
func labRegions() Lab {
	return Lab{Name: "regions", About: "two regions and a home 80 ms away: one synchronous store vs per-region budgets reconciled in the background; a shift of demand; a region cut off",
		Usage: `Issue 15's experiment: three local Redis Clusters (regions eu and us, 3
primaries each; home, 3 primaries with a replica each), every home node
behind a delay proxy (--rtt round trip between a region and home), two
sluice processes per region. Paced load of one key, --demand requests/s,
70 % from eu and 30 % from us, then 30/70 halfway, in three setups: one
global synchronous store (every process's --cluster is home), purely
regional (each region its own budget on its own cluster: the latency
baseline) and per-region + async reconcile (scope: global, --region,
--home-cluster). Prints requests/s, p50/p99 per region and admitted against
the global budget (limit + rate × elapsed) side by side, the admissions per
second around the shift and how long the allocation took to follow it, the
allocation counters, then eu cut off from home for --cut while us is not:
what eu admitted against its floor plus what it held, the error replies and
what it admitted once home returned. Needs redis-server and redis-cli on
PATH; starts the sluice binary as 'sluice serve' for every process.
`, Flags: func(fs *flag.FlagSet) (LabFunc, error) {
			rep := &RegionsLabReport{}
			c := &rep.Config
			return rigFlags(rep, func() {
				fs.DurationVar(&c.RTT, "rtt", c.RTT, "round trip between a region and home (each proxy delays half of it each way)")
				fs.DurationVar(&c.Duration, "duration", c.Duration, "load of the synchronous and of the per-region setups, the shift halfway")
				fs.DurationVar(&c.Baseline, "baseline", c.Baseline, "load of the purely regional setup")
				fs.DurationVar(&c.Cut, "cut", c.Cut, "how long eu is cut off from home")
				fs.DurationVar(&c.Settle, "settle", c.Settle, "load before the cut")
				fs.DurationVar(&c.After, "after", c.After, "load after home returns (at least 2s)")
				fs.StringVar(&c.CutMode, "cut-mode", c.CutMode, "how eu is cut off: stall (bytes held: timeouts) or reset (connections reset)")
				fs.Int64Var(&c.Limit, "limit", c.Limit, "the global budget's burst")
				fs.Int64Var(&c.Rate, "rate", c.Rate, "the global budget's refill, per second")
				fs.Float64Var(&c.Demand, "demand", c.Demand, "requests per second over both regions")
				fs.Float64Var(&c.Floor, "floor", c.Floor, "region_floor: the share of limit and rate a region cut off from home admits")
				fs.IntVar(&c.Workers, "workers", c.Workers, "load goroutines per region, one request in flight each")
				fs.Int64Var(&c.MaxRequests, "max-requests", c.MaxRequests, "at most this many requests per setup")
			})
		}}
}

// BenchUsage is what `sluice-lab bench -h` prints above its flags.
const BenchUsage = `usage: sluice-lab bench [flags]

Runs redis-benchmark against sluice (RL.TAKE), against a second sluice in
embedded mode (RL.TAKE decided in process: the front end's ceiling) and
straight at the Redis Cluster shards (EVALSHA of the same script, same
policy), alternating, and prints a markdown table; --out and --svg write it
and an SVG chart to files. Without --cluster it starts a local 3+3 Redis
Cluster; without --sluice it starts the sluice binary (--binary, else the
one beside sluice-lab, else one built from the checkout, else sluice on
PATH) as 'sluice serve', and the embedded sluice is that binary too. Needs
redis-benchmark (and redis-server, redis-cli) on PATH.

`

// BenchFlags declares the flags of `sluice-lab bench` on fs and returns the
// run for once fs is parsed: Run, or RunFronts with --front, each printing
// its report to stdout (and to --out) and its progress to stderr.
func BenchFlags(fs *flag.FlagSet) func(ctx context.Context, stdout, stderr io.Writer) error {
	var (
		cfg       Config
		clusterS  string
		pipelines string
		scenarios string
	)
	fs.StringVar(&clusterS, "cluster", "", "seed nodes host:port[,…] of a running Redis Cluster (default: start one)")
	fs.StringVar(&cfg.SluiceAddr, "sluice", "", "host:port of a running sluice in front of --cluster whose policy admits everything (default: start one)")
	embedded := fs.Bool("embedded", true, "also measure the sluice binary in embedded mode, the front end's ceiling")
	fs.IntVar(&cfg.Requests, "requests", 0, "requests per run, redis-benchmark -n (default 200000 at pipeline 1, 1000000 deeper; 2000 with --quick; 200000 at every depth with --keys or --workload)")
	fs.IntVar(&cfg.Clients, "clients", DefaultClients, "parallel connections, redis-benchmark -c")
	fs.StringVar(&pipelines, "pipelines", "1,16", "pipeline depths to sweep, redis-benchmark -P")
	fs.IntVar(&cfg.Keyspace, "keyspace", DefaultKeyspace, "keys of the uniform scenario, redis-benchmark -r; with --keys or --workload, the tenants' keys")
	fs.IntVar(&cfg.Rounds, "rounds", 0, "rounds, sides alternating; the table shows the median (default 2; 1 with --quick)")
	fs.IntVar(&cfg.Threads, "threads", 1, "redis-benchmark --threads for every run, every side; more than 1 adds up to 250ms to each run's time in redis-benchmark 7.0")
	fs.StringVar(&scenarios, "scenarios", "uniform,hot", "scenarios: uniform (random keys), hot (one key), hot-lease (one key, a lease policy on the sluice side; not in the default)")
	fs.IntVar(&cfg.Warmup, "warmup", 0, "unrecorded requests per side before the rounds (default 20000; 500 with --quick; 2000 with --keys or --workload; -1 none)")
	fs.BoolVar(&cfg.Quick, "quick", false, "a smoke run: 2000 requests per run, 1 round")
	fs.StringVar(&cfg.MarkdownPath, "out", "", "also write the markdown report to this file (default: stdout only)")
	fs.StringVar(&cfg.SVGPath, "svg", "", "write the SVG chart to this file (default: none)")
	fs.StringVar(&cfg.RedisBenchmark, "redis-benchmark", "redis-benchmark", "the redis-benchmark binary")
	fs.DurationVar(&cfg.RunTimeout, "run-timeout", DefaultRunTimeout, "bound of one redis-benchmark run")
	peer := fs.String("peer", "", "with --front: also drive a peer limiter on this machine: gubernator, or ratelimit (envoyproxy/ratelimit on the same cluster, driven like the grpc door); its binary from --peer-bin, PATH, or built once with go install into the user cache")
	fs.StringVar(&cfg.Binary, "binary", "", "the sluice binary to start as 'sluice serve', the embedded runs too (default: the sluice beside this executable, else one built from the checkout, else sluice on PATH)")
	peerBin := fs.String("peer-bin", "", "the peer's binary")
	keys := fs.String("keys", "", "instead: `uniform|zipf:S` keys (S > 1, over --keyspace), one raw-RESP Go load generator for both sides, RL.TAKE through sluice vs EVALSHA to the owning primary, --pipelines requests in flight per caller, Redis CPU per decision in every row (default: redis-benchmark's uniform keys, as above)")
	workload := fs.String("workload", "", "with the Go generator (implies --keys uniform when --keys is not given): workloads `tenants,abuse,durable,hot` to run, tenants the --keys keys under a policy that admits everything, abuse --logins keys under 5/min, nearly every request refused, durable the tenants' keys under the same policy with durability: replica, hot one key under the policy that admits everything with the default hot-key protection (lease)")
	logins := fs.Int("logins", DefaultLogins, "keys of --workload abuse")
	ab := fs.String("ab", "", "instead: `OLD,NEW` sluice binaries, A B A B: the README's bench table rows (uniform keys P1 and P16 by redis-benchmark; Zipf tenants, 2,000,000 keys, s = 1.1, P1 and P16; abusers P16; one hot key P16), --rounds (default 2) of each binary, --requests per run (default 50000), with Redis CPU and sluice CPU per decision, printed as a table of medians old → new")
	abLabels := fs.String("ab-labels", "A,B", "with --ab: the two binaries' names in the table")
	front := fs.String("front", "", "instead: drive the doors resp,http,grpc of one sluice with a Go load generator (--clients callers, --requests each, uniform keys), next to RL.TAKE by redis-benchmark and direct EVALSHA")
	return func(ctx context.Context, stdout, stderr io.Writer) error {
		cfg.NoEmbedded = !*embedded
		if clusterS != "" {
			cfg.Cluster = strings.Split(clusterS, ",")
		}
		if *ab != "" {
			return runTableCommand(ctx, fs, cfg, *ab, *abLabels, stdout, stderr)
		}
		if *front != "" && *keys == "" && *workload == "" {
			return runFrontsCommand(ctx, cfg, *front, *peer, *peerBin, stdout, stderr)
		}
		var err error
		if cfg.Pipelines, err = intList(pipelines); err != nil {
			return fmt.Errorf("bench: --pipelines: %w", err)
		}
		if *keys != "" || *workload != "" {
			return runWorkloadsCommand(ctx, fs, cfg, *keys, *workload, *logins, stdout, stderr)
		}
		for _, s := range strings.Split(scenarios, ",") {
			cfg.Scenarios = append(cfg.Scenarios, Scenario(strings.TrimSpace(s)))
		}
		_, err = Run(ctx, cfg, stdout, stderr)
		return err
	}
}

// runFrontsCommand is `sluice-lab bench --front doors`: the flags of cfg that
// RunFronts reads, its report printed and written to --out.
func runFrontsCommand(ctx context.Context, cfg Config, doors, peer, peerBin string, stdout, stderr io.Writer) error {
	fc := FrontConfig{Binary: cfg.Binary, Cluster: cfg.Cluster, RedisBenchmark: cfg.RedisBenchmark, Clients: cfg.Clients, Requests: cfg.Requests,
		Keyspace: cfg.Keyspace, MarkdownPath: cfg.MarkdownPath, Peer: peer, PeerBin: peerBin}
	for _, d := range strings.Split(doors, ",") {
		fc.Doors = append(fc.Doors, strings.TrimSpace(d))
	}
	if cfg.Quick && fc.Requests == 0 {
		fc.Requests = QuickRequests
	}
	rep, err := RunFronts(ctx, fc, stderr)
	if err != nil {
		return err
	}
	md := rep.Markdown()
	fmt.Fprint(stdout, md)
	if fc.MarkdownPath != "" {
		return os.WriteFile(fc.MarkdownPath, []byte(md), 0o644)
	}
	return nil
}

// runWorkloadsCommand is `sluice-lab bench --keys … --workload …`: RunWorkloads
// with the flags of cfg it reads; the flags of the redis-benchmark runs
// that would mean nothing here are refused rather than ignored.
func runWorkloadsCommand(ctx context.Context, fs *flag.FlagSet, cfg Config, keys, workload string, logins int, stdout, stderr io.Writer) error {
	var refused []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "front", "sluice", "svg", "scenarios", "threads", "embedded", "peer", "peer-bin", "redis-benchmark":
			refused = append(refused, "--"+f.Name)
		}
	})
	if len(refused) > 0 {
		return fmt.Errorf("bench: --keys and --workload use their own load generator and sluice: %s do not apply", strings.Join(refused, ", "))
	}
	wc := WorkloadConfig{Binary: cfg.Binary, Cluster: cfg.Cluster, Clients: cfg.Clients, Depths: cfg.Pipelines, Requests: cfg.Requests,
		Keyspace: cfg.Keyspace, Logins: logins, Rounds: cfg.Rounds, Warmup: cfg.Warmup, RunTimeout: cfg.RunTimeout, MarkdownPath: cfg.MarkdownPath}
	if keys == "" {
		keys = "uniform"
	}
	var err error
	if wc.Keys, err = ParseKeys(keys); err != nil {
		return fmt.Errorf("bench: --keys: %w", err)
	}
	if workload != "" {
		for _, w := range strings.Split(workload, ",") {
			wc.Workloads = append(wc.Workloads, strings.TrimSpace(w))
		}
	}
	if cfg.Quick {
		wc.Requests = cmp.Or(wc.Requests, QuickRequests)
		wc.Rounds = cmp.Or(wc.Rounds, QuickRounds)
		wc.Warmup = cmp.Or(wc.Warmup, QuickWarmup)
	}
	_, err = RunWorkloads(ctx, wc, stdout, stderr)
	return err
}

// runTableCommand is `sluice-lab bench --ab OLD,NEW`: RunTable with the flags
// of cfg it reads; the flags of the other modes are refused rather than
// ignored.
func runTableCommand(ctx context.Context, fs *flag.FlagSet, cfg Config, binaries, labels string, stdout, stderr io.Writer) error {
	var refused []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "ab", "ab-labels", "cluster", "requests", "rounds", "clients", "out":
		default:
			refused = append(refused, "--"+f.Name)
		}
	})
	if len(refused) > 0 {
		return fmt.Errorf("bench: --ab runs its own rows with --cluster, --requests, --rounds, --clients and --out: %s do not apply", strings.Join(refused, ", "))
	}
	tc := TableConfig{Binaries: strings.Split(binaries, ","), Labels: strings.Split(labels, ","), Cluster: cfg.Cluster,
		Requests: cfg.Requests, Rounds: cfg.Rounds, Clients: cfg.Clients, MarkdownPath: cfg.MarkdownPath}
	_, err := RunTable(ctx, tc, stdout, stderr)
	return err
}
