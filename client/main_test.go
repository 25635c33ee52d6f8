package client_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/app"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// examplePolicies is the config every example's sluice runs.
const examplePolicies = `defaults:
  on_store_error: closed
  deny_cache: false
policies:
  - {name: api, match: "api:*", limit: 3, rate: 1, period: 1h}
  - {name: llm, match: "llm:*", limit: 10000, rate: 1, period: 1h}
  - {name: renders, match: "render:*", algorithm: concurrency, limit: 2, period: 1m}
`

// sluiceAddr is the RESP address the examples dial: an embedded sluice
// started by TestMain, or, inside TestExamplesOnCluster, one in front of
// a real Redis Cluster.
var sluiceAddr string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-client")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	file := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(file, []byte(examplePolicies), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	policyFile = file
	ctx, cancel := context.WithCancel(context.Background())
	a, err := startSluice(ctx, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sluiceAddr = a.Addr().String()
	code := m.Run()
	cancel()
	_ = a.Shutdown(context.Background())
	os.RemoveAll(dir)
	os.Exit(code)
}

var policyFile string

// startSluice runs sluice in process on a free port: embedded when
// cluster is empty, else in front of those seeds.
func startSluice(ctx context.Context, cluster string) (*app.App, error) {
	cfg := app.Defaults()
	cfg.Listen, cfg.Admin, cfg.PolicyFile, cfg.Cluster = "127.0.0.1:0", "", policyFile, cluster
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := app.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := a.Start(ctx); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// examples are the package's examples, for TestExamplesOnCluster.
var examples = map[string]func(){
	"Example":             Example,
	"ExampleClient_Take":  ExampleClient_Take,
	"ExampleClient_MTake": ExampleClient_MTake,
	"ExampleClient_Reset": ExampleClient_Reset,
	"ExampleClient_Peek":  ExampleClient_Peek,
	"ExampleError":        ExampleError,
}

// TestExamplesOnCluster runs every example against a sluice in front of
// a real 3+3 Redis Cluster and against a fresh embedded sluice, and wants
// the same output from both (go test checks the embedded output against
// each example's Output comment). The examples print no decided_by, the
// one field where the two modes differ.
func TestExamplesOnCluster(t *testing.T) {
	c := redistest.NewCluster(t, localredis.Config{})
	ctx := t.Context()
	onCluster, err := startSluice(ctx, strings.Join(c.Addrs(), ","))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = onCluster.Shutdown(context.Background()) })
	saved := sluiceAddr
	t.Cleanup(func() { sluiceAddr = saved })
	for name, run := range examples {
		sluiceAddr = onCluster.Addr().String()
		got := capture(t, run)
		embedded, err := startSluice(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		sluiceAddr = embedded.Addr().String()
		want := capture(t, run)
		_ = embedded.Shutdown(context.Background())
		if got != want || got == "" {
			t.Errorf("%s on the cluster printed\n%s\nembedded printed\n%s", name, got, want)
		}
	}
}

// capture runs f with os.Stdout redirected and returns what it printed.
func capture(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, r)
		done <- b.String()
	}()
	defer func() { os.Stdout = saved }()
	f()
	w.Close()
	return <-done
}
