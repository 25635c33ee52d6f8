package client_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

// The examples need a real sluice, and this module must not import the
// server's packages to start one (they would become a requirement of
// every service that imports the client). So TestMain builds the binary
// from ../cmd/sluice with go, and the tests run it as a user does: the
// embedded store needs no Redis, so the examples run under -short too.
func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sluice-client-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if sluiceBinary, err = buildSluice(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	policyFile = filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(policyFile, []byte(examplePolicies), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	embedded, err := startSluice()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer embedded.stop()
	sluiceAddr = embedded.addr
	return m.Run()
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
	addrs := startCluster(t)
	onCluster, err := startSluice("--cluster", strings.Join(addrs, ","))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(onCluster.stop)
	saved := sluiceAddr
	t.Cleanup(func() { sluiceAddr = saved })
	for name, run := range examples {
		sluiceAddr = onCluster.addr
		got := capture(t, run)
		embedded, err := startSluice()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(embedded.stop)
		sluiceAddr = embedded.addr
		want := capture(t, run)
		embedded.stop()
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
