// Command sluice is a rate-limiter server that speaks the Redis protocol and
// decides RL.TAKE with one atomic Lua script on the Redis Cluster shard that
// owns the key.
//
//	sluice serve [--listen 127.0.0.1:6380] [--cluster a,b,c | --redis redis://…] [--config sluice.yaml]
//	sluice check --config sluice.yaml [--aclfile FILE]
//	sluice cluster up|down [--dir DIR]
//	sluice bench [flags]
//	sluice lab hot|soak|global|partition|restart|latency [flags]
//	sluice version
//
// `sluice` alone lists every command.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	_ "time/tzdata" // calendar quotas' time zones, on a machine without /usr/share/zoneinfo
)

// version is the release's version, set at build time with -ldflags
// "-X main.version=…" (make release does); empty, `sluice version` takes the
// module version Go recorded in the binary (version.go).
var version string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

// command is one thing sluice does: its name, one line for the usage and
// what runs it with the arguments after the name. A command with subs runs
// the one its first argument names, and the usage lists each of them.
type command struct {
	name  string
	about string
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	subs  []command
}

// commands are every command of the binary, in the order the usage lists
// them.
func commands() []command {
	return []command{
		{name: "serve", about: "run the rate-limiter server (embedded store unless --cluster, --redis or --sentinel)", run: serve},
		{name: "check", about: "validate a --config policy file and an --aclfile without starting", run: check},
		{name: "cluster", subs: clusterCommands()},
		{name: "bench", about: "redis-benchmark through sluice vs straight at the cluster: a table and a chart", run: benchCmd},
		{name: "lab", subs: labCommands()},
		{name: "version", about: "print the version", run: printVersion},
	}
}

// run is the whole program, testable without a process: flags, wiring and
// the subcommand, until ctx is cancelled.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-v") {
		args = append([]string{"version"}, args[1:]...)
	}
	return dispatch(ctx, nil, commands(), args, stdout, stderr)
}

// dispatch runs the command of cmds that args[0] names; parents are the
// names before it ("lab"), for the usage and the errors.
func dispatch(ctx context.Context, parents []string, cmds []command, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage(parents, cmds))
		return fmt.Errorf("%sno command", strings.ReplaceAll(spelled(parents), " ", ": "))
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage(parents, cmds))
		return nil
	}
	for _, c := range cmds {
		switch {
		case c.name != args[0]:
		case c.subs != nil:
			return dispatch(ctx, append(slices.Clip(parents), c.name), c.subs, args[1:], stdout, stderr)
		default:
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprint(stderr, usage(parents, cmds))
	return fmt.Errorf("unknown command %q", spelled(parents)+args[0])
}

// spelled is the names of parents as the command line has them, each
// followed by a space: "lab ".
func spelled(parents []string) string {
	var b strings.Builder
	for _, p := range parents {
		b.WriteString(p + " ")
	}
	return b.String()
}

// usage lists every command below parents, subcommands spelled out
// ("cluster up"), one line each.
func usage(parents []string, cmds []command) string {
	var b strings.Builder
	prefix := spelled(parents)
	fmt.Fprintf(&b, "usage: sluice %s<command> [flags]\n\ncommands:\n", prefix)
	var list func(names string, cmds []command)
	list = func(names string, cmds []command) {
		for _, c := range cmds {
			if c.subs != nil {
				list(names+c.name+" ", c.subs)
				continue
			}
			fmt.Fprintf(&b, "  %-16s%s\n", names+c.name, c.about)
		}
	}
	list(prefix, cmds)
	fmt.Fprintf(&b, "\nRun 'sluice %s<command> -h' for its flags.\n", prefix)
	return b.String()
}
