package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/internal/cli"
	"github.com/sluice-rl/sluice/internal/localredis"
)

const defaultClusterDir = ".sluice-cluster"

// defaultNodeTimeout is cluster-node-timeout of `cluster up`: how long a
// node may be unreachable before its replica is promoted (localredis's
// default too).
const defaultNodeTimeout = 5 * time.Second

// clusterCommands are `sluice-lab cluster up|down`: a local Redis Cluster
// from redis-server binaries, for trying sluice and for the labs.
func clusterCommands() []cli.Command {
	return []cli.Command{
		{Name: "up", About: "start a local Redis Cluster for trying sluice; prints --cluster …", Run: clusterUp},
		{Name: "down", About: "stop the cluster that 'cluster up' started", Run: clusterDown},
	}
}

// clusterFlags is the flag set of `cluster up|down`, with --dir, which
// both have.
func clusterFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("cluster "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs, fs.String("dir", defaultClusterDir, "folder for the nodes' files and the state file")
}

func clusterUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, dir := clusterFlags("up", stderr)
	port := fs.Int("port", 7000, "first client port (0: free ports)")
	primaries := fs.Int("primaries", 3, "primaries")
	replicas := fs.Int("replicas", 1, "replicas per primary (0: none)")
	nodeTimeout := fs.Duration("node-timeout", defaultNodeTimeout, "cluster-node-timeout: how long a node may be unreachable before its replica is promoted")
	if err := cli.ParseNoArgs(fs, args); err != nil {
		return err
	}
	r := *replicas
	if r == 0 {
		r = -1
	}
	c, err := localredis.Up(ctx, localredis.Config{
		Dir: *dir, Port: *port, Primaries: *primaries, Replicas: r,
		NodeTimeout: *nodeTimeout, Log: stderr,
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "--cluster "+strings.Join(c.Addrs(), ","))
	return nil
}

func clusterDown(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs, dir := clusterFlags("down", stderr)
	if err := cli.ParseNoArgs(fs, args); err != nil {
		return err
	}
	if err := localredis.Down(*dir); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "cluster in", *dir, "stopped")
	return nil
}
