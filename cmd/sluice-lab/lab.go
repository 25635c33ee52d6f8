package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/sluice-rl/sluice/bench"
	"github.com/sluice-rl/sluice/internal/cli"
)

// labCommands are `sluice-lab <experiment>`, one command each: experiments
// that show a property of sluice with real processes; see bench.Labs. Each
// prints its report, a markdown table, and writes it to a file only when
// --out names one.
func labCommands() []cli.Command {
	labs := bench.Labs()
	cmds := make([]cli.Command, len(labs))
	for i, l := range labs {
		cmds[i] = cli.Command{Name: l.Name, About: l.About, Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return labMain(ctx, l, args, stdout, stderr)
		}}
	}
	return cmds
}

// labMain is one experiment: its flags (the experiment's own, each with
// the experiment's default, and --out, everyone's), the run and the
// report, printed to stdout and to --out when set. Every number flag of an
// experiment must be positive: zero would quietly mean the default.
func labMain(ctx context.Context, l bench.Lab, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(l.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: sluice-lab %s [flags]\n\n%s\n", l.Name, l.Usage)
		fs.PrintDefaults()
	}
	out := fs.String("out", "", "also write the markdown report to this file (default: stdout only)")
	experiment, err := l.Flags(fs)
	if err != nil {
		return err
	}
	if err := cli.ParseNoArgs(fs, args); err != nil {
		return err
	}
	if err := positive(fs); err != nil {
		return err
	}
	rep, err := experiment(ctx, stderr)
	if err != nil {
		return err
	}
	md := rep.Markdown()
	if _, err := io.WriteString(stdout, md); err != nil {
		return err
	}
	return writeOut(*out, md)
}
