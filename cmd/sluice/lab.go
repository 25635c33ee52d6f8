package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/bench"
)

// labCmd is `sluice lab <experiment>`: experiments that show a property of
// sluice with real processes; see bench.HotLab.
func labCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = `usage: sluice lab <experiment> [flags]

experiments:
  hot        one key at the machine's top rate through two sluice instances
             in front of one cluster, once per hot-key mode (strict, split,
             lease): requests/s, p99, admitted against the budget, decided_by
  soak       mixed keys under load for minutes while faults are injected in
             turn; samples sluice's goroutines, RSS and open file descriptors
  global     is the limit global? one tenant (capacity 100, refill 50/s)
             through 1 sluice, 2 sluices on the cluster, 2 embedded sluices:
             allowed against 100 + 50 × elapsed, and the verdict
  partition  the owning primary frozen (SIGSTOP) under 2 sluices, once per
             on_store_error (open, closed, local): allowed, rejected, error
             replies, slowest reply, decided_by
  restart    SCRIPT FLUSH, a restart empty, a failover of the owning primary
             under load: error replies, NOSCRIPT reloads, time to strict
  latency    p50/p99 of one decision: in process, through embedded sluice,
             through sluice and the cluster, EVALSHA straight to the owner

Run 'sluice lab <experiment> -h' for its flags.
`
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("lab: no experiment")
	}
	switch args[0] {
	case "hot":
		return labHot(ctx, args[1:], stdout, stderr)
	case "soak":
		return labSoak(ctx, args[1:], stdout, stderr)
	case "global":
		return labGlobal(ctx, args[1:], stdout, stderr)
	case "partition":
		return labPartition(ctx, args[1:], stdout, stderr)
	case "restart":
		return labRestart(ctx, args[1:], stdout, stderr)
	case "latency":
		return labLatency(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("lab: unknown experiment %q", args[0])
}

// labHot is `sluice lab hot`.
func labHot(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lab hot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: sluice lab hot [flags]

The hot-tenant experiment: one key (hot:tenant) at the machine's top rate
through two sluice instances in front of one Redis Cluster, once per hot-key
mode, with the same policy otherwise (limit 1000, rate 500/1s,
on_store_error closed, hot threshold 1000 requests/s per instance, split 8).
Prints requests/s, p99, admitted against the budget (limit + rate × elapsed)
and the decided_by counts as a markdown table, and writes it to --out.
Without --cluster it starts a local 3+3 Redis Cluster (needs redis-server
and redis-cli on PATH); it starts this binary as 'sluice serve' for each
instance and stops it after each mode.

`)
		fs.PrintDefaults()
	}
	var (
		cfg      bench.HotLabConfig
		clusterS string
		modes    string
		out      string
	)
	fs.StringVar(&clusterS, "cluster", "", "seed nodes host:port[,…] of a running Redis Cluster (default: start one)")
	fs.StringVar(&modes, "modes", "strict,split,lease", "hot-key modes to run, in order: strict (hot mode off), split, lease")
	fs.DurationVar(&cfg.Duration, "duration", bench.DefaultHotLabDuration, "load per mode")
	fs.Int64Var(&cfg.MaxRequests, "max-requests", bench.DefaultHotLabMaxRequests, "at most this many requests per mode")
	fs.IntVar(&cfg.Instances, "instances", bench.DefaultHotLabInstances, "sluice processes in front of the cluster")
	fs.IntVar(&cfg.Workers, "workers", bench.DefaultHotLabWorkers, "load goroutines per instance, one pipeline in flight each")
	fs.IntVar(&cfg.Pipeline, "pipeline", bench.DefaultHotLabPipeline, "RL.TAKE commands per pipeline")
	fs.IntVar(&cfg.Split, "split", bench.DefaultHotLabSplit, "sub-buckets of the split mode")
	fs.StringVar(&out, "out", "bench/hotlab.md", "write the markdown report here (\"\" = stdout only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("lab hot: unexpected argument %q", fs.Arg(0))
	}
	if clusterS != "" {
		cfg.Cluster = strings.Split(clusterS, ",")
	}
	for _, m := range strings.Split(modes, ",") {
		cfg.Modes = append(cfg.Modes, bench.HotLabMode(strings.TrimSpace(m)))
	}
	if cfg.Duration <= 0 || cfg.MaxRequests <= 0 || cfg.Instances <= 0 || cfg.Workers <= 0 || cfg.Pipeline <= 0 || cfg.Split <= 0 {
		return errors.New("lab hot: --duration, --max-requests, --instances, --workers, --pipeline and --split must be positive")
	}
	rep, err := bench.RunLab(ctx, &bench.HotLabReport{Config: cfg}, stderr)
	if err != nil {
		return err
	}
	return rep.Write(stdout, out)
}

// labSoak is `sluice lab soak`.
func labSoak(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lab soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.SoakConfig
	fs.DurationVar(&cfg.Duration, "duration", 3*time.Minute, "how long the load runs")
	fs.DurationVar(&cfg.Sample, "sample", 10*time.Second, "between samples")
	fs.DurationVar(&cfg.Fault, "fault", 20*time.Second, "between faults")
	fs.IntVar(&cfg.Workers, "workers", 16, "client goroutines")
	out := fs.String("out", "", "also write the table here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.Binary = bin
	rep, err := bench.Soak(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	md := rep.Markdown()
	fmt.Fprint(stdout, md)
	if *out != "" {
		return os.WriteFile(*out, []byte(md), 0o644)
	}
	return nil
}

// labFlags is the flag set of one experiment, with its usage text.
func labFlags(name, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("lab "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: sluice lab %s [flags]\n\n%s\n", name, about)
		fs.PrintDefaults()
	}
	return fs
}

// parseLab parses the flags and refuses stray arguments.
func parseLab(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

func seedList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// labGlobal is `sluice lab global`.
func labGlobal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := labFlags("global", `The seed lab's experiment 1: one tenant key, a token bucket of capacity 100
refilled 50/s, through 1 sluice process in front of the Redis Cluster, 2
processes in front of it (one shared bucket) and 2 processes in embedded
mode (each its own in-process bucket), for --duration each. Prints allowed,
rejected, expected (100 + 50 × elapsed, one shared bucket) and a verdict
computed from their ratio as a markdown table, and writes it to --out.
Without --cluster it starts a local 3+3 Redis Cluster (redis-server and
redis-cli on PATH); it starts this binary as 'sluice serve' for each process.
`, stderr)
	var (
		cfg      bench.GlobalLabConfig
		clusterS string
		out      string
	)
	fs.StringVar(&clusterS, "cluster", "", "seed nodes host:port[,…] of a running Redis Cluster (default: start one)")
	fs.DurationVar(&cfg.Duration, "duration", bench.DefaultGlobalLabDuration, "load per row")
	fs.Int64Var(&cfg.MaxRequests, "max-requests", bench.DefaultGlobalLabMaxRequests, "at most this many requests per row")
	fs.IntVar(&cfg.Workers, "workers", bench.DefaultGlobalLabWorkers, "goroutines per sluice process, one request in flight each")
	fs.StringVar(&out, "out", "bench/lab-global.md", "write the markdown report here (\"\" = stdout only)")
	if err := parseLab(fs, args); err != nil {
		return err
	}
	if cfg.Duration <= 0 || cfg.MaxRequests <= 0 || cfg.Workers <= 0 {
		return errors.New("lab global: --duration, --max-requests and --workers must be positive")
	}
	cfg.Cluster = seedList(clusterS)
	rep, err := bench.RunLab(ctx, &bench.GlobalLabReport{Config: cfg}, stderr)
	if err != nil {
		return err
	}
	return bench.WriteMarkdown(stdout, out, rep.Markdown())
}

// labPartition is `sluice lab partition`.
func labPartition(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := labFlags("partition", `The seed lab's experiment 2: 2 sluice processes in front of a local 3+3
Redis Cluster (cluster-node-timeout 60s, so nothing fails over); the primary
owning three keys (on_store_error open, closed, local with local_share 0.5;
capacity 100, refill 50/s) is stopped with SIGSTOP for --pause while the
keys are sent RL.TAKE through both processes, then resumed with SIGCONT.
Prints allowed, rejected, error replies, slowest reply, decided_by, the time
to strict decisions again and a verdict per policy, and writes it to --out.
It always starts its own cluster (it must signal a node).
`, stderr)
	var (
		cfg bench.PartitionLabConfig
		out string
	)
	fs.DurationVar(&cfg.Pause, "pause", bench.DefaultPartitionLabPause, "how long the primary stays stopped, under load")
	fs.Int64Var(&cfg.MaxRequests, "max-requests", bench.DefaultPartitionLabMaxRequests, "at most this many requests per policy")
	fs.IntVar(&cfg.Instances, "instances", bench.DefaultPartitionLabInstances, "sluice processes")
	fs.IntVar(&cfg.Workers, "workers", bench.DefaultPartitionLabWorkers, "goroutines per process and policy")
	fs.DurationVar(&cfg.Timeout, "timeout", bench.DefaultPartitionLabTimeout, "the policy file's store deadline")
	fs.StringVar(&out, "out", "bench/lab-partition.md", "write the markdown report here (\"\" = stdout only)")
	if err := parseLab(fs, args); err != nil {
		return err
	}
	if cfg.Pause <= 0 || cfg.MaxRequests <= 0 || cfg.Instances <= 0 || cfg.Workers <= 0 || cfg.Timeout <= 0 {
		return errors.New("lab partition: --pause, --max-requests, --instances, --workers and --timeout must be positive")
	}
	rep, err := bench.RunLab(ctx, &bench.PartitionLabReport{Config: cfg}, stderr)
	if err != nil {
		return err
	}
	return bench.WriteMarkdown(stdout, out, rep.Markdown())
}

// labRestart is `sluice lab restart`.
func labRestart(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := labFlags("restart", `The seed lab's "survives a Redis restart": 2 sluice processes in front of a
local 3+3 Redis Cluster decide one key while its primary meets, in turn,
SCRIPT FLUSH; SIGKILL and a restart --down later with no data and no scripts
(failover held off); SIGKILL with its replica promoted (cluster-node-timeout
--node-timeout). Prints per event the requests until decisions are strict
again, error replies (there must be none), NOSCRIPT replies and EVAL reloads
on the owner, the time to strict decisions and decided_by, and writes it to
--out. It always starts its own cluster (it must kill a node).
`, stderr)
	var (
		cfg bench.RestartLabConfig
		out string
	)
	fs.DurationVar(&cfg.Down, "down", bench.DefaultRestartLabDown, "how long the killed primary stays down before its restart")
	fs.DurationVar(&cfg.Window, "window", bench.DefaultRestartLabWindow, "the least time the load runs after each event")
	fs.DurationVar(&cfg.NodeTimeout, "node-timeout", bench.DefaultRestartLabNodeTimeout, "cluster-node-timeout for the failover")
	fs.Int64Var(&cfg.MaxRequests, "max-requests", bench.DefaultRestartLabMaxRequests, "at most this many requests per event")
	fs.IntVar(&cfg.Instances, "instances", bench.DefaultRestartLabInstances, "sluice processes")
	fs.IntVar(&cfg.Workers, "workers", bench.DefaultRestartLabWorkers, "goroutines per process")
	fs.DurationVar(&cfg.Timeout, "timeout", bench.DefaultRestartLabTimeout, "the policy file's store deadline")
	fs.StringVar(&out, "out", "bench/lab-restart.md", "write the markdown report here (\"\" = stdout only)")
	if err := parseLab(fs, args); err != nil {
		return err
	}
	if cfg.Down <= 0 || cfg.Window <= 0 || cfg.NodeTimeout <= 0 || cfg.MaxRequests <= 0 || cfg.Instances <= 0 || cfg.Workers <= 0 || cfg.Timeout <= 0 {
		return errors.New("lab restart: every flag must be positive")
	}
	rep, err := bench.RunLab(ctx, &bench.RestartLabReport{Config: cfg}, stderr)
	if err != nil {
		return err
	}
	return bench.WriteMarkdown(stdout, out, rep.Markdown())
}

// labLatency is `sluice lab latency`.
func labLatency(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := labFlags("latency", `The seed lab's latency table: one client, one decision at a time, --samples
per path: the Go token bucket in this process, RL.TAKE through sluice in
embedded mode, RL.TAKE through sluice in front of the Redis Cluster, and
EVALSHA of sluice's script straight to the primary that owns the key.
Prints p50 and p99 per path, and writes it to --out. Without --cluster it
starts a local 3+3 Redis Cluster.
`, stderr)
	var (
		cfg      bench.LatencyLabConfig
		clusterS string
		out      string
	)
	fs.StringVar(&clusterS, "cluster", "", "seed nodes host:port[,…] of a running Redis Cluster (default: start one)")
	fs.IntVar(&cfg.Samples, "samples", bench.DefaultLatencyLabSamples, fmt.Sprintf("timed decisions per path (at most %d)", bench.MaxLatencyLabSamples))
	fs.StringVar(&out, "out", "bench/lab-latency.md", "write the markdown report here (\"\" = stdout only)")
	if err := parseLab(fs, args); err != nil {
		return err
	}
	if cfg.Samples <= 0 || cfg.Samples > bench.MaxLatencyLabSamples {
		return fmt.Errorf("lab latency: --samples %d: want 1…%d", cfg.Samples, bench.MaxLatencyLabSamples)
	}
	cfg.Cluster = seedList(clusterS)
	rep, err := bench.RunLab(ctx, &bench.LatencyLabReport{Config: cfg}, stderr)
	if err != nil {
		return err
	}
	return bench.WriteMarkdown(stdout, out, rep.Markdown())
}
