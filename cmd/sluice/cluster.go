package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sluice-rl/sluice/internal/localredis"
)

const defaultClusterDir = ".sluice-cluster"

func clusterCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "up" && args[0] != "down") {
		fmt.Fprintln(stderr, "usage: sluice cluster up|down [--dir DIR] [--port 7000] [--primaries 3] [--replicas 1]")
		return errors.New("cluster: want up or down")
	}
	fs := flag.NewFlagSet("cluster "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", defaultClusterDir, "folder for the nodes' files and the state file")
	if args[0] == "down" {
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if err := localredis.Down(*dir); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "cluster in", *dir, "stopped")
		return nil
	}
	port := fs.Int("port", 7000, "first client port (0: free ports)")
	primaries := fs.Int("primaries", 3, "primaries")
	replicas := fs.Int("replicas", 1, "replicas per primary (0: none)")
	nodeTimeout := fs.Duration("node-timeout", 0, "cluster-node-timeout (0: 5s)")
	if err := fs.Parse(args[1:]); err != nil {
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
