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
  hot   one key at the machine's top rate through two sluice instances in
        front of one cluster, once per hot-key mode (strict, split, lease):
        requests/s, p99, admitted against the budget, decided_by
  soak  mixed keys under load for minutes while faults are injected in turn;
        samples sluice's goroutines, RSS and open file descriptors

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
	rep, err := bench.HotLab(ctx, cfg, stderr)
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
