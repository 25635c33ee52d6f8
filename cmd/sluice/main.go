// Command sluice is a rate-limiter server that speaks the Redis protocol and
// decides RL.TAKE with one atomic Lua script on the Redis Cluster shard that
// owns the key. It does three things:
//
//	sluice serve [--listen 127.0.0.1:6380] [--cluster a,b,c | --redis redis://… | --sentinel NAME@a,b] [--config sluice.yaml]
//	sluice check --config sluice.yaml [--aclfile FILE]
//	sluice version [-v]
//
// `sluice` alone lists them, and `sluice serve -h` every flag of the
// server. The benchmark, the labs and the local cluster launcher are
// another binary, cmd/sluice-lab, so that this one links none of them;
// their old spellings here answer with the new ones and fail (moved.go).
package main

import (
	"context"
	"io"
	_ "time/tzdata" // calendar quotas' time zones, on a machine without /usr/share/zoneinfo

	"github.com/sluice-rl/sluice/internal/cli"
)

// version is the release's version, set at build time with -ldflags
// "-X main.version=…" (make release does); empty, `sluice version` takes the
// module version Go recorded in the binary (version.go).
var version string

func main() { cli.Main("sluice", run) }

// program is the binary's commands, in the order the usage lists them.
func program() cli.Program {
	return cli.Program{Name: "sluice", Commands: []cli.Command{
		{Name: "serve", About: "run the rate-limiter server (embedded store unless --cluster, --redis or --sentinel)", Run: serve},
		{Name: "check", About: "validate a --config policy file and an --aclfile without starting", Run: check},
		{Name: "version", About: "print the version", Run: printVersion},
	}}
}

// run is the whole program, testable without a process: flags, wiring and
// the subcommand, until ctx is cancelled.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-v") {
		args = append([]string{"version"}, args[1:]...)
	}
	if err := moved(args); err != nil {
		return err
	}
	return program().Run(ctx, args, stdout, stderr)
}
