package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/bench"
)

// labCommands are `sluice lab <experiment>`: experiments that show a
// property of sluice with real processes; see bench.RunLab. Each prints
// its report, a markdown table, and writes it to a file only when --out
// names one.
func labCommands() []command {
	return []command{
		{name: "hot", run: labHot, about: "one hot key through two sluice instances, once per hot-key mode (strict, split, lease)"},
		{name: "soak", run: labSoak, about: "minutes of mixed load and faults; sluice's goroutines, RSS and open files"},
		{name: "global", run: labGlobal, about: "is the limit global? 1 sluice, 2 sluices on the cluster, 2 embedded sluices"},
		{name: "partition", run: labPartition, about: "the owning primary frozen (SIGSTOP) under load, once per on_store_error"},
		{name: "restart", run: labRestart, about: "SCRIPT FLUSH, a restart, a failover of the owning primary under load"},
		{name: "latency", run: labLatency, about: "p50/p99 of one decision: in process, embedded, through the cluster, EVALSHA"},
		{name: "overload", run: labOverload, about: "50 → 5,000 redis-benchmark clients through one sluice and straight at the shards; one tenant in the surge"},
		{name: "regions", run: labRegions, about: "two regions and a home 80 ms away: one synchronous store vs per-region budgets reconciled in the background; a shift of demand; a region cut off"},
	}
}

// labFlags is the flag set of one experiment, with its usage text and
// --out, which every experiment has.
func labFlags(name, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("lab "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: sluice lab %s [flags]\n\n%s\n", name, about)
		fs.PrintDefaults()
	}
	fs.String("out", "", "also write the markdown report to this file (default: stdout only)")
	return fs
}

// clusterSeeds adds --cluster, the seed nodes of a running cluster, to the
// experiments that can use one.
func clusterSeeds(fs *flag.FlagSet, seeds *[]string) {
	fs.Func("cluster", "seed nodes `host:port,…` of a running Redis Cluster (default: start one)", func(s string) error {
		*seeds = strings.Split(s, ",")
		return nil
	})
}

// report is what an experiment returns.
type report interface{ Markdown() string }

// labMain is one experiment of the rig (bench.RunLab): its flags (flags
// adds the experiment's own, each with the experiment's default; --out is
// everyone's), the run and the report.
func labMain(ctx context.Context, args []string, stdout, stderr io.Writer, rep bench.Experiment, name, about string, flags func(fs *flag.FlagSet)) error {
	if err := bench.Defaults(rep); err != nil {
		return err
	}
	fs := labFlags(name, about, stderr)
	flags(fs)
	return printReport(fs, args, stdout, func() (report, error) { return bench.RunLab(ctx, rep, stderr) })
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

// printReport parses the experiment's flags, runs it and prints its
// report to stdout, and to --out when set. Every number flag of an
// experiment must be positive: zero would quietly mean the default.
func printReport(fs *flag.FlagSet, args []string, stdout io.Writer, experiment func() (report, error)) error {
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := positive(fs); err != nil {
		return err
	}
	rep, err := experiment()
	if err != nil {
		return err
	}
	md := rep.Markdown()
	if _, err := io.WriteString(stdout, md); err != nil {
		return err
	}
	return writeOut(fs.Lookup("out").Value.String(), md)
}

func labHot(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	rep := &bench.HotLabReport{}
	return labMain(ctx, args, stdout, stderr, rep, "hot", `The hot-tenant experiment: one key (hot:tenant) at the machine's top rate
through two sluice instances in front of one Redis Cluster, once per hot-key
mode, with the same policy otherwise (limit 1000, rate 500/1s,
on_store_error closed, hot threshold 1000 requests/s per instance, split 8).
Prints requests/s, p99, admitted against the budget (limit + rate × elapsed)
and the decided_by counts as a markdown table. Without --cluster it starts a
local 3+3 Redis Cluster (needs redis-server and redis-cli on PATH); it starts
this binary as 'sluice serve' for each instance and stops it after each mode.
`, func(fs *flag.FlagSet) {
		c := &rep.Config
		fs.Func("modes", "hot-key `modes` to run, in order: strict (hot mode off), split, lease (default strict,split,lease)", func(s string) error {
			c.Modes = nil
			for _, m := range strings.Split(s, ",") {
				c.Modes = append(c.Modes, bench.HotLabMode(strings.TrimSpace(m)))
			}
			return nil
		})
		loadFlags(fs, "mode", &c.MaxRequests, &c.Workers, &c.Instances)
		fs.DurationVar(&c.Duration, "duration", c.Duration, "load per mode")
		fs.IntVar(&c.Pipeline, "pipeline", c.Pipeline, "RL.TAKE commands per pipeline")
		fs.IntVar(&c.Split, "split", c.Split, "sub-buckets of the split mode")
		clusterSeeds(fs, &c.Cluster)
	})
}

func labSoak(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := labFlags("soak", `Mixed keys (a hot leased key and keys of every on_store_error) under load
for --duration against a local 3+3 Redis Cluster, while faults are injected
in turn every --fault: SCRIPT FLUSH on every node, a primary paused for a
second, a flood of 500 connects and disconnects. Samples sluice's
goroutines, RSS and open file descriptors every --sample, which must end
where they started once the load is gone, and prints them as a table.
`, stderr)
	var cfg bench.SoakConfig
	fs.DurationVar(&cfg.Duration, "duration", bench.DefaultSoakDuration, "how long the load runs")
	fs.DurationVar(&cfg.Sample, "sample", bench.DefaultSoakSample, "between samples")
	fs.DurationVar(&cfg.Fault, "fault", bench.DefaultSoakFault, "between faults")
	fs.IntVar(&cfg.Workers, "workers", bench.DefaultSoakWorkers, "client goroutines")
	return printReport(fs, args, stdout, func() (report, error) { return bench.Soak(ctx, cfg, stderr) })
}

func labGlobal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	rep := &bench.GlobalLabReport{}
	return labMain(ctx, args, stdout, stderr, rep, "global", `The seed lab's experiment 1: one tenant key, a token bucket of capacity 100
refilled 50/s, through 1 sluice process in front of the Redis Cluster, 2
processes in front of it (one shared bucket) and 2 processes in embedded
mode (each its own in-process bucket), for --duration each. Prints allowed,
rejected, expected (100 + 50 × elapsed, one shared bucket) and a verdict
computed from their ratio as a markdown table. Without --cluster it starts
a local 3+3 Redis Cluster (redis-server and redis-cli on PATH); it starts
this binary as 'sluice serve' for each process.
`, func(fs *flag.FlagSet) {
		clusterSeeds(fs, &rep.Config.Cluster)
		fs.DurationVar(&rep.Config.Duration, "duration", rep.Config.Duration, "load per row")
		loadFlags(fs, "row", &rep.Config.MaxRequests, &rep.Config.Workers, nil)
	})
}

func labPartition(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	rep := &bench.PartitionLabReport{}
	return labMain(ctx, args, stdout, stderr, rep, "partition", `The seed lab's experiment 2: 2 sluice processes in front of a local 3+3
Redis Cluster (cluster-node-timeout 60s, so nothing fails over); the primary
owning three keys (on_store_error open, closed, local with local_share 0.5;
capacity 100, refill 50/s) is stopped with SIGSTOP for --pause while the
keys are sent RL.TAKE through both processes, then resumed with SIGCONT.
Prints allowed, rejected, error replies, slowest reply, decided_by, the time
to strict decisions again and a verdict per policy. It always starts its
own cluster (it must signal a node).
`, func(fs *flag.FlagSet) {
		c := &rep.Config
		fs.DurationVar(&c.Pause, "pause", c.Pause, "how long the primary stays stopped, under load")
		fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "the policy file's store deadline")
		loadFlags(fs, "policy", &c.MaxRequests, &c.Workers, &c.Instances)
	})
}

func labRestart(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	rep := &bench.RestartLabReport{}
	return labMain(ctx, args, stdout, stderr, rep, "restart", `The seed lab's "survives a Redis restart": 2 sluice processes in front of a
local 3+3 Redis Cluster decide one key while its primary meets, in turn,
SCRIPT FLUSH; SIGKILL and a restart --down later with no data and no scripts
(failover held off); SIGKILL with its replica promoted (cluster-node-timeout
--node-timeout). Prints per event the requests until decisions are strict
again, error replies (there must be none), NOSCRIPT replies and EVAL reloads
on the owner, the time to strict decisions and decided_by. It always starts
its own cluster (it must kill a node).
`, func(fs *flag.FlagSet) {
		c := &rep.Config
		loadFlags(fs, "event", &c.MaxRequests, &c.Workers, &c.Instances)
		fs.DurationVar(&c.Down, "down", c.Down, "how long the killed primary stays down before its restart")
		fs.DurationVar(&c.Window, "window", c.Window, "the least time the load runs after each event")
		fs.DurationVar(&c.NodeTimeout, "node-timeout", c.NodeTimeout, "cluster-node-timeout for the failover")
		fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "the policy file's store deadline")
	})
}

func labLatency(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	rep := &bench.LatencyLabReport{}
	return labMain(ctx, args, stdout, stderr, rep, "latency", `The seed lab's latency table: one client, one decision at a time, --samples
per path: the Go token bucket in this process, RL.TAKE through sluice in
embedded mode, RL.TAKE through sluice in front of the Redis Cluster, and
EVALSHA of sluice's script straight to the primary that owns the key.
Prints p50 and p99 per path. Without --cluster it starts a local 3+3 Redis
Cluster.
`, func(fs *flag.FlagSet) {
		clusterSeeds(fs, &rep.Config.Cluster)
		fs.IntVar(&rep.Config.Samples, "samples", rep.Config.Samples, fmt.Sprintf("timed decisions per path (at most %d)", bench.MaxLatencyLabSamples))
	})
}

func labOverload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	rep := &bench.OverloadLabReport{}
	return labMain(ctx, args, stdout, stderr, rep, "overload", `A surge is not an outage: one sluice process (policy timeout --timeout) in
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
`, func(fs *flag.FlagSet) {
		c := &rep.Config
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
}

func labRegions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	rep := &bench.RegionsLabReport{}
	return labMain(ctx, args, stdout, stderr, rep, "regions", `Issue 15's experiment: three local Redis Clusters (regions eu and us, 3
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
PATH; starts this binary as 'sluice serve' for every process.
`, func(fs *flag.FlagSet) {
		c := &rep.Config
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
}

// commaInts is a flag's default list: 50,200,1000.
func commaInts(v []int) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}
