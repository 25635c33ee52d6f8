// Package cli is the command tree both binaries share, so that `sluice`
// and `sluice-lab` read alike: a command, its dispatch by name, the usage
// that lists every command, and main's exit. It declares no flags of its
// own and imports nothing of sluice: what a command does is its binary's.
package cli

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
)

// Command is one thing a binary does: its name, one line for the usage and
// what runs it with the arguments after the name. A command with Subs runs
// the one its first argument names, and the usage lists each of them
// ("cluster up").
type Command struct {
	Name  string
	About string
	Run   func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	Subs  []Command
}

// Program is a binary: its name, as usage lines and errors spell it, and
// its commands, in the order the usage lists them.
type Program struct {
	Name     string
	Commands []Command
}

// Main runs run with the process's arguments under a context that SIGINT
// and SIGTERM cancel, and exits 1 after printing "name: error" when it
// fails (-h is no failure: the flag set printed the help).
func Main(name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Run runs the command args[0] names; no command, or an unknown one,
// prints the usage to stderr and fails, and help, -h and --help print it
// to stdout.
func (p Program) Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return p.dispatch(ctx, nil, p.Commands, args, stdout, stderr)
}

// dispatch runs the command of cmds that args[0] names; parents are the
// names before it ("cluster"), for the usage and the errors.
func (p Program) dispatch(ctx context.Context, parents []string, cmds []Command, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, p.usage(parents, cmds))
		return fmt.Errorf("%sno command", strings.ReplaceAll(spelled(parents), " ", ": "))
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, p.usage(parents, cmds))
		return nil
	}
	for _, c := range cmds {
		switch {
		case c.Name != args[0]:
		case c.Subs != nil:
			return p.dispatch(ctx, append(slices.Clip(parents), c.Name), c.Subs, args[1:], stdout, stderr)
		default:
			return c.Run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprint(stderr, p.usage(parents, cmds))
	return fmt.Errorf("unknown command %q", spelled(parents)+args[0])
}

// spelled is the names of parents as the command line has them, each
// followed by a space: "cluster ".
func spelled(parents []string) string {
	var b strings.Builder
	for _, p := range parents {
		b.WriteString(p + " ")
	}
	return b.String()
}

// usage lists every command below parents, subcommands spelled out
// ("cluster up"), one line each.
func (p Program) usage(parents []string, cmds []Command) string {
	var b strings.Builder
	prefix := spelled(parents)
	fmt.Fprintf(&b, "usage: %s %s<command> [flags]\n\ncommands:\n", p.Name, prefix)
	var list func(names string, cmds []Command)
	list = func(names string, cmds []Command) {
		for _, c := range cmds {
			if c.Subs != nil {
				list(names+c.Name+" ", c.Subs)
				continue
			}
			fmt.Fprintf(&b, "  %-16s%s\n", names+c.Name, c.About)
		}
	}
	list(prefix, cmds)
	fmt.Fprintf(&b, "\nRun '%s %s<command> -h' for its flags.\n", p.Name, prefix)
	return b.String()
}

// ParseNoArgs parses the flags and refuses stray arguments.
func ParseNoArgs(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}
