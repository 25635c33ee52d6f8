package main

import (
	"bytes"
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/bench"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// binary is sluice-lab, built by TestMain with the sluice server beside
// it, as make build leaves them: the labs start that sluice.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-lab-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "sluice-lab")
	build := exec.Command("go", "build", "-o", dir, ".", "../sluice")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building sluice-lab and sluice:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func requireTool(t *testing.T, name string) {
	t.Helper()
	redistest.SkipShort(t, name) // each test that asks starts a cluster
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not found on PATH: CI must install it", name)
		}
		t.Skipf("%s not found on PATH", name)
	}
}

// `sluice-lab` without arguments lists every command: bench, each
// experiment of bench.Labs at the top level, cluster up and down.
func TestUsageListsEveryCommand(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), nil, &stdout, &stderr); err == nil {
		t.Fatal("sluice-lab without a command succeeded")
	}
	usage := stderr.String()
	want := []string{"bench", "cluster up", "cluster down"}
	for _, l := range bench.Labs() {
		want = append(want, l.Name)
	}
	if len(want) < 11 {
		t.Fatalf("bench.Labs() lists %d experiments; hot, soak, global, partition, restart, latency, overload and regions at least", len(want)-3)
	}
	for _, cmd := range want {
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(cmd) + ` `).MatchString(usage) {
			t.Errorf("usage does not list %q:\n%s", cmd, usage)
		}
	}
	if strings.Contains(usage, "serve") {
		t.Errorf("usage lists serve, which is the server's:\n%s", usage)
	}
}

// The package comment, what `go doc` shows, has a line for every command,
// every experiment included.
func TestPackageDocListsEveryCommand(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	var names []string
	for _, c := range program().Commands {
		if c.Subs == nil {
			names = append(names, c.Name)
		}
		for _, s := range c.Subs {
			names = append(names, c.Name+" "+s.Name)
		}
	}
	for _, n := range names {
		if !regexp.MustCompile(`(?m)^\s+sluice-lab ` + regexp.QuoteMeta(n) + `\b`).MatchString(doc) {
			t.Errorf("main.go's package comment has no line for `sluice-lab %s`:\n%s", n, doc)
		}
	}
}

// cluster up starts a Redis Cluster that answers and prints its --cluster
// argument; cluster down stops every node of it.
func TestClusterUpDown(t *testing.T) {
	t.Parallel()
	requireTool(t, "redis-server")
	requireTool(t, "redis-cli")
	dir := t.TempDir()
	out, err := exec.Command(binary, "cluster", "up", "--dir", dir, "--port", "0").Output()
	if err != nil {
		t.Fatalf("cluster up: %v", err)
	}
	m := regexp.MustCompile(`--cluster (\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("cluster up printed %q", out)
	}
	t.Cleanup(func() { _ = exec.Command(binary, "cluster", "down", "--dir", dir).Run() })
	seeds := strings.Split(string(m[1]), ",")
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil || !strings.Contains(info, "cluster_state:ok") {
		t.Fatalf("CLUSTER INFO after cluster up: %v\n%s", err, info)
	}
	if err := c.Set(ctx, "up", "1", 0).Err(); err != nil {
		t.Fatalf("SET through the cluster: %v", err)
	}
	if out, err := exec.Command(binary, "cluster", "down", "--dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("cluster down: %v\n%s", err, out)
	}
	for _, addr := range seeds {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections after cluster down", addr)
		}
	}
}

// usageFlags runs `sluice-lab <args> -h` and returns the flag names it
// prints.
func usageFlags(t *testing.T, args ...string) []string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	_ = run(context.Background(), append(args, "-h"), &stdout, &stderr)
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`).FindAllStringSubmatch(stderr.String(), -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatalf("sluice-lab %v -h printed no flags:\n%s", args, stderr.String())
	}
	return names
}

// Every flag of `cluster up` and `cluster down` (from their flag sets, as
// -h prints them) is in the command-line line for that command of
// docs/configuration.md, and of README.md where it has one.
func TestDocsListClusterFlags(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"../../docs/configuration.md", "../../README.md"} {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, sub := range []string{"up", "down"} {
			line := regexp.MustCompile(`(?m)^sluice-lab cluster ` + sub + ` .*$`).FindString(string(text))
			if line == "" {
				if strings.HasSuffix(path, "README.md") {
					continue
				}
				t.Fatalf("%s has no line starting with `sluice-lab cluster %s`", path, sub)
			}
			for _, f := range usageFlags(t, "cluster", sub) {
				if !strings.Contains(line, "[--"+f+" ") {
					t.Errorf("%s: the `sluice-lab cluster %s` line lacks --%s:\n%s", path, sub, f, line)
				}
			}
		}
	}
}

// A lab prints its table and writes no file unless --out names one: run in
// a fresh working directory, it leaves no bench/ folder behind.
func TestLabWritesOnlyWithOut(t *testing.T) {
	t.Parallel()
	requireTool(t, "redis-server")
	c := redistest.NewCluster(t, localredis.Config{})
	seeds := strings.Join(c.Addrs(), ",")
	const header = "| Path | p50 | p99 | decided by | note |"
	lab := func(dir string, extra ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, append([]string{"latency", "--samples", "50", "--cluster", seeds}, extra...)...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sluice-lab latency %v: %v\n%s", extra, err, stderr.String())
		}
		if !strings.Contains(string(out), header) {
			t.Fatalf("sluice-lab latency %v printed no table:\n%s", extra, out)
		}
		if beside := filepath.Join(filepath.Dir(binary), "sluice") + " serve"; !strings.Contains(stderr.String(), beside) {
			t.Errorf("sluice-lab latency did not start the sluice beside it (%s):\n%s", beside, stderr.String())
		}
		return string(out)
	}

	dir := t.TempDir()
	lab(dir)
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("sluice-lab latency without --out left %v in its working directory (%v)", names, err)
	}

	out := lab(dir, "--out", "latency.md")
	b, err := os.ReadFile(filepath.Join(dir, "latency.md"))
	if err != nil {
		t.Fatalf("--out latency.md: %v", err)
	}
	if string(b) != out {
		t.Errorf("--out latency.md holds\n%s\nbut stdout was\n%s", b, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "bench")); !os.IsNotExist(err) {
		t.Errorf("a bench/ folder exists after --out latency.md (%v)", err)
	}
}

// A lab's counts and durations must be positive: 0 would quietly mean the
// default, a negative value makes no sense. The check names each bad flag
// and runs nothing.
func TestLabFlagsMustBePositive(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"global", "--workers", "0", "--duration", "-1s"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--workers 0") || !strings.Contains(err.Error(), "--duration -1s") {
		t.Fatalf("global --workers 0 --duration -1s: %v", err)
	}
	if stdout.Len() != 0 {
		t.Errorf("printed a report:\n%s", stdout.String())
	}
}
