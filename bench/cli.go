package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// The command lines of `sluice bench` and `sluice lab <experiment>`, as
// flags declared on a flag set the command owns: cmd/sluice makes the set,
// parses it and prints; each experiment's flags, defaults and usage live
// with the experiment (its lab_*.go file, BenchFlags for `sluice bench`).

// Markdowner is what an experiment returns: a report with its text.
type Markdowner interface{ Markdown() string }

// LabFunc runs an experiment whose flags are parsed; progress lines go to
// progress.
type LabFunc func(ctx context.Context, progress io.Writer) (Markdowner, error)

// Lab is one experiment of `sluice lab` as its command line sees it: its
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

// Labs are the experiments of `sluice lab`, in the order its usage lists
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

// BenchUsage is what `sluice bench -h` prints above its flags.
const BenchUsage = `usage: sluice bench [flags]

Runs redis-benchmark against sluice (RL.TAKE), against a second sluice in
embedded mode (RL.TAKE decided in process: the front end's ceiling) and
straight at the Redis Cluster shards (EVALSHA of the same script, same
policy), alternating, and prints a markdown table; --out and --svg write it
and an SVG chart to files. Without --cluster it starts a local 3+3 Redis
Cluster; without --sluice it starts this binary as 'sluice serve'; the
embedded sluice is always this binary. Needs redis-benchmark (and
redis-server, redis-cli) on PATH.

`

// BenchFlags declares the flags of `sluice bench` on fs and returns the
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
	embedded := fs.Bool("embedded", true, "also measure this binary in embedded mode, the front end's ceiling")
	fs.IntVar(&cfg.Requests, "requests", 0, "requests per run, redis-benchmark -n (default 200000 at pipeline 1, 1000000 deeper; 2000 with --quick)")
	fs.IntVar(&cfg.Clients, "clients", DefaultClients, "parallel connections, redis-benchmark -c")
	fs.StringVar(&pipelines, "pipelines", "1,16", "pipeline depths to sweep, redis-benchmark -P")
	fs.IntVar(&cfg.Keyspace, "keyspace", DefaultKeyspace, "keys of the uniform scenario, redis-benchmark -r")
	fs.IntVar(&cfg.Rounds, "rounds", 0, "rounds, sides alternating; the table shows the median (default 2; 1 with --quick)")
	fs.IntVar(&cfg.Threads, "threads", 1, "redis-benchmark --threads for every run, every side; more than 1 adds up to 250ms to each run's time in redis-benchmark 7.0")
	fs.StringVar(&scenarios, "scenarios", "uniform,hot", "scenarios: uniform (random keys), hot (one key), hot-lease (one key, a lease policy on the sluice side; not in the default)")
	fs.IntVar(&cfg.Warmup, "warmup", 0, "unrecorded requests per side before the rounds (default 20000; 500 with --quick; -1 none)")
	fs.BoolVar(&cfg.Quick, "quick", false, "a smoke run: 2000 requests per run, 1 round")
	fs.StringVar(&cfg.MarkdownPath, "out", "", "also write the markdown report to this file (default: stdout only)")
	fs.StringVar(&cfg.SVGPath, "svg", "", "write the SVG chart to this file (default: none)")
	fs.StringVar(&cfg.RedisBenchmark, "redis-benchmark", "redis-benchmark", "the redis-benchmark binary")
	fs.DurationVar(&cfg.RunTimeout, "run-timeout", DefaultRunTimeout, "bound of one redis-benchmark run")
	peer := fs.String("peer", "", "with --front: also drive a peer limiter on this machine: gubernator (its binary from --peer-bin, PATH, or built once with go install into the user cache)")
	peerBin := fs.String("peer-bin", "", "the peer's binary")
	front := fs.String("front", "", "instead: drive the doors resp,http,grpc of one sluice with a Go load generator (--clients callers, --requests each, uniform keys), next to RL.TAKE by redis-benchmark and direct EVALSHA")
	return func(ctx context.Context, stdout, stderr io.Writer) error {
		cfg.NoEmbedded = !*embedded
		if clusterS != "" {
			cfg.Cluster = strings.Split(clusterS, ",")
		}
		if *front != "" {
			return runFrontsCommand(ctx, cfg, *front, *peer, *peerBin, stdout, stderr)
		}
		var err error
		if cfg.Pipelines, err = intList(pipelines); err != nil {
			return fmt.Errorf("bench: --pipelines: %w", err)
		}
		for _, s := range strings.Split(scenarios, ",") {
			cfg.Scenarios = append(cfg.Scenarios, Scenario(strings.TrimSpace(s)))
		}
		_, err = Run(ctx, cfg, stdout, stderr)
		return err
	}
}

// runFrontsCommand is `sluice bench --front doors`: the flags of cfg that
// RunFronts reads, its report printed and written to --out.
func runFrontsCommand(ctx context.Context, cfg Config, doors, peer, peerBin string, stdout, stderr io.Writer) error {
	fc := FrontConfig{Cluster: cfg.Cluster, RedisBenchmark: cfg.RedisBenchmark, Clients: cfg.Clients, Requests: cfg.Requests,
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
