package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/sluice-rl/sluice/bench"
	"github.com/sluice-rl/sluice/internal/cli"
)

// benchCmd is `sluice-lab bench`: redis-benchmark against sluice, against an
// embedded sluice and against the cluster directly, in one run; see package
// bench (BenchFlags).
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, bench.BenchUsage)
		fs.PrintDefaults()
	}
	run := bench.BenchFlags(fs)
	if err := cli.ParseNoArgs(fs, args); err != nil {
		return err
	}
	return run(ctx, stdout, stderr)
}
