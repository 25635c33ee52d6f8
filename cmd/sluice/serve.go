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

	"github.com/sluice-rl/sluice/app"
	"github.com/sluice-rl/sluice/internal/cli"
	"github.com/sluice-rl/sluice/policy"
)

// serve is `sluice serve`: the flags, the environment and the files make
// one app.Config (app.Load: one table, one precedence rule), which runs
// until ctx ends; SIGHUP reloads --config, --aclfile and --envoy-config,
// and so does a change of their content on disk (--watch-config: the app
// watches them).
func serve(ctx context.Context, args []string, _, stderr io.Writer) error {
	cfg, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	if cfg.Logger, err = cfg.NewLogger(stderr); err != nil {
		return err
	}
	cfg.Version = readBuild().Version // sluice_build_info{version} and INFO say what `sluice version` says
	// Before anything listens: a SIGHUP must never find its default
	// action, which ends the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	a, err := app.New(ctx, *cfg)
	if err != nil {
		return err
	}
	if err := a.Start(ctx); err != nil {
		a.Close()
		return err
	}
	for {
		select {
		case <-hup:
			_ = a.Reload() // logged and counted; the last good config stays
		case err := <-a.Err():
			a.Close()
			return err
		case <-ctx.Done():
			return a.Shutdown(context.Background())
		}
	}
}

// parseServeFlags is the Config of serve's arguments, with the process's
// environment.
func parseServeFlags(args []string, stderr io.Writer) (*app.Config, error) {
	return app.Load(args, os.Getenv, stderr)
}

// check is `sluice check --config FILE [--aclfile FILE]`: it loads each
// file given as serve would, prints one line per file, and fails with the
// first error (file:line, and for a policy the policy and the field)
// without starting anything.
func check(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "policy file (YAML) to validate")
	aclfile := fs.String("aclfile", "", "ACL file (Redis syntax) to validate")
	if err := cli.ParseNoArgs(fs, args); err != nil {
		return err
	}
	if *config == "" && *aclfile == "" {
		return errors.New("check: give --config FILE, --aclfile FILE or both")
	}
	if *config != "" {
		set, err := policy.Load(*config)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: ok, %d policies\n", *config, len(set.Policies))
	}
	if *aclfile != "" {
		users, err := app.LoadACLFile(*aclfile)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: ok, %d users\n", *aclfile, len(users.Names()))
	}
	return nil
}
