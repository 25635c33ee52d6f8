// Command sluice is a rate-limiter server that speaks the Redis protocol and
// decides RL.TAKE with one atomic Lua script on the Redis Cluster shard that
// owns the key.
//
//	sluice serve [--listen 127.0.0.1:6380] [--cluster a,b,c | --redis redis://…] [--config sluice.yaml]
//	sluice cluster up|down [--dir DIR]
//	sluice version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

const usage = `usage: sluice <command> [flags]

commands:
  serve     run the rate-limiter server (embedded store unless --cluster or --redis)
  cluster   up | down: a local Redis Cluster from redis-server, for trying sluice
  bench     redis-benchmark through sluice vs straight at the cluster: a table and a chart
  lab       experiments with real processes: 'lab hot' (one hot key, two instances, each hot-key mode)
  version   print the version

Run 'sluice <command> -h' for the flags of a command.
`

// run is the whole program, testable without a process: flags, wiring and
// the subcommand, until ctx is cancelled.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "cluster":
		return clusterCmd(ctx, args[1:], stdout, stderr)
	case "bench":
		return benchCmd(ctx, args[1:], stdout, stderr)
	case "lab":
		return labCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "sluice", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
