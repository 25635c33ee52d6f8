package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/bench"
)

// benchCmd is `sluice bench`: redis-benchmark against sluice, against an
// embedded sluice and against the cluster directly, in one run; see package
// bench.
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: sluice bench [flags]

Runs redis-benchmark against sluice (RL.TAKE), against a second sluice in
embedded mode (RL.TAKE decided in process: the front end's ceiling) and
straight at the Redis Cluster shards (EVALSHA of the same script, same
policy), alternating, and prints a markdown table; --out and --svg write it
and an SVG chart to files. Without --cluster it starts a local 3+3 Redis
Cluster; without --sluice it starts this binary as 'sluice serve'; the
embedded sluice is always this binary. Needs redis-benchmark (and
redis-server, redis-cli) on PATH.

`)
		fs.PrintDefaults()
	}
	var (
		cfg       bench.Config
		clusterS  string
		pipelines string
		scenarios string
	)
	fs.StringVar(&clusterS, "cluster", "", "seed nodes host:port[,…] of a running Redis Cluster (default: start one)")
	fs.StringVar(&cfg.SluiceAddr, "sluice", "", "host:port of a running sluice in front of --cluster whose policy admits everything (default: start one)")
	embedded := fs.Bool("embedded", true, "also measure this binary in embedded mode, the front end's ceiling")
	fs.IntVar(&cfg.Requests, "requests", 0, "requests per run, redis-benchmark -n (default 200000 at pipeline 1, 1000000 deeper; 2000 with --quick)")
	fs.IntVar(&cfg.Clients, "clients", bench.DefaultClients, "parallel connections, redis-benchmark -c")
	fs.StringVar(&pipelines, "pipelines", "1,16", "pipeline depths to sweep, redis-benchmark -P")
	fs.IntVar(&cfg.Keyspace, "keyspace", bench.DefaultKeyspace, "keys of the uniform scenario, redis-benchmark -r")
	fs.IntVar(&cfg.Rounds, "rounds", 0, "rounds, sides alternating; the table shows the median (default 2; 1 with --quick)")
	fs.IntVar(&cfg.Threads, "threads", 1, "redis-benchmark --threads for every run, every side; more than 1 adds up to 250ms to each run's time in redis-benchmark 7.0")
	fs.StringVar(&scenarios, "scenarios", "uniform,hot", "scenarios: uniform (random keys), hot (one key), hot-lease (one key, a lease policy on the sluice side; not in the default)")
	fs.IntVar(&cfg.Warmup, "warmup", 0, "unrecorded requests per side before the rounds (default 20000; 500 with --quick; -1 none)")
	fs.BoolVar(&cfg.Quick, "quick", false, "a smoke run: 2000 requests per run, 1 round")
	fs.StringVar(&cfg.MarkdownPath, "out", "", "also write the markdown report to this file (default: stdout only)")
	fs.StringVar(&cfg.SVGPath, "svg", "", "write the SVG chart to this file (default: none)")
	fs.StringVar(&cfg.RedisBenchmark, "redis-benchmark", "redis-benchmark", "the redis-benchmark binary")
	fs.DurationVar(&cfg.RunTimeout, "run-timeout", bench.DefaultRunTimeout, "bound of one redis-benchmark run")
	peer := fs.String("peer", "", "with --front: also drive a peer limiter on this machine: gubernator (its binary from --peer-bin, PATH, or built once with go install into the user cache)")
	peerBin := fs.String("peer-bin", "", "the peer's binary")
	front := fs.String("front", "", "instead: drive the doors resp,http,grpc of one sluice with a Go load generator (--clients callers, --requests each, uniform keys), next to RL.TAKE by redis-benchmark and direct EVALSHA")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	cfg.NoEmbedded = !*embedded
	if clusterS != "" {
		cfg.Cluster = strings.Split(clusterS, ",")
	}
	if *front != "" {
		fc := bench.FrontConfig{Cluster: cfg.Cluster, RedisBenchmark: cfg.RedisBenchmark, Clients: cfg.Clients, Requests: cfg.Requests,
			Keyspace: cfg.Keyspace, MarkdownPath: cfg.MarkdownPath, Peer: *peer, PeerBin: *peerBin}
		for _, d := range strings.Split(*front, ",") {
			fc.Doors = append(fc.Doors, strings.TrimSpace(d))
		}
		if cfg.Quick && fc.Requests == 0 {
			fc.Requests = bench.QuickRequests
		}
		rep, err := bench.RunFronts(ctx, fc, stderr)
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
	var err error
	if cfg.Pipelines, err = intList(pipelines); err != nil {
		return fmt.Errorf("bench: --pipelines: %w", err)
	}
	for _, s := range strings.Split(scenarios, ",") {
		cfg.Scenarios = append(cfg.Scenarios, bench.Scenario(strings.TrimSpace(s)))
	}
	_, err = bench.Run(ctx, cfg, stdout, stderr)
	return err
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
