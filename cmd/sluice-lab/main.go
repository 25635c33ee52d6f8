// Command sluice-lab is sluice's lab, beside the server as redis-benchmark
// stands beside redis-server: the benchmark, the experiments that show a
// property of sluice with real processes, and a local Redis Cluster to try
// it on. It starts the sluice binary (`sluice serve`) for what it measures:
// --binary where a command has it, else the sluice beside this executable
// (make build and go install put them side by side), else one built from
// the checkout it runs in (go run ./cmd/sluice-lab), else sluice on PATH.
//
//	sluice-lab bench [flags]            redis-benchmark through sluice vs straight at the shards
//	sluice-lab hot [flags]              one hot key through two instances, per hot-key mode
//	sluice-lab soak [flags]             minutes of load and faults: goroutines, RSS, open files
//	sluice-lab global [flags]           is the limit global? 1, 2 and 2 embedded sluices
//	sluice-lab partition [flags]        the owning primary frozen, per on_store_error
//	sluice-lab restart [flags]          SCRIPT FLUSH, a restart, a failover under load
//	sluice-lab latency [flags]          p50/p99 of one decision, path by path
//	sluice-lab overload [flags]         50 → 5,000 clients through one sluice
//	sluice-lab regions [flags]          per-region budgets of a global one, a region cut off
//	sluice-lab cluster up [--dir DIR] [--port 7000] [--primaries 3] [--replicas 1] [--node-timeout 5s]
//	sluice-lab cluster down [--dir DIR]
//
// `sluice-lab` alone lists every command, `sluice-lab <command> -h` its
// flags. docs/labs.md shows what each experiment printed.
package main

import (
	"context"
	"io"

	"github.com/sluice-rl/sluice/internal/cli"
)

func main() { cli.Main("sluice-lab", run) }

// program is the binary's commands, in the order the usage lists them:
// bench, every experiment of bench.Labs, cluster up|down.
func program() cli.Program {
	cmds := []cli.Command{{Name: "bench", About: "redis-benchmark through sluice vs straight at the cluster: a table and a chart", Run: benchCmd}}
	cmds = append(cmds, labCommands()...)
	cmds = append(cmds, cli.Command{Name: "cluster", Subs: clusterCommands()})
	return cli.Program{Name: "sluice-lab", Commands: cmds}
}

// run is the whole program, testable without a process, until ctx is
// cancelled.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return program().Run(ctx, args, stdout, stderr)
}
