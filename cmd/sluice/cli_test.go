package main

import (
	"bytes"
	"context"
	"errors"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/redistest"
)

func hostPort(t *testing.T, addr string) (string, string) {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	return addr[:i], addr[i+1:]
}

// Embedded mode needs nothing else installed, and says its limits are per
// process.
func TestEmbeddedModeSaysPerProcess(t *testing.T) {
	t.Parallel()
	s := startSluice(t)
	if !strings.Contains(s.Logs(), "limits are per process") {
		t.Fatalf("no per-process warning at start:\n%s", s.Logs())
	}
	if !strings.Contains(s.Logs(), `rule="default`) {
		t.Fatalf("built-in policy not printed at start:\n%s", s.Logs())
	}
	r, err := take(context.Background(), s.client(t), "acme", 1)
	if err != nil || !r.Allowed || r.DecidedBy != "embedded" || r.Limit != 100 || r.Remaining != 99 {
		t.Fatalf("got %+v %v", r, err)
	}
	info, err := s.client(t).Do(context.Background(), "RL.INFO").Text()
	if err != nil || !strings.Contains(info, "store:embedded") || !strings.Contains(info, "decided_by_embedded:1") {
		t.Fatalf("RL.INFO: %v\n%s", err, info)
	}
}

func TestRedisCLIOneShotAndInteractive(t *testing.T) {
	t.Parallel()
	cli := requireTool(t, "redis-cli")
	s := startSluice(t)
	host, port := hostPort(t, s.Addr)

	out, err := exec.Command(cli, "-h", host, "-p", port, "RL.TAKE", "cli:one", "3").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli: %v\n%s", err, out)
	}
	lines := strings.Fields(string(out))
	if want := []string{"1", "100", "97", "-1"}; len(lines) != 6 || strings.Join(lines[:4], " ") != strings.Join(want, " ") || lines[5] != "embedded" {
		t.Fatalf("redis-cli RL.TAKE printed %q", out)
	}

	cmd := exec.Command(cli, "-h", host, "-p", port)
	cmd.Stdin = strings.NewReader("PING\nRL.TAKE cli:two 2\nRL.PEEK cli:two\nRL.RESET cli:two\nRL.TAKE cli:two 0\nNOSUCH\n")
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli interactive: %v\n%s", err, out)
	}
	for _, want := range []string{"PONG", "98", "embedded", "(error) ERR cost must be a positive integer", "(error) ERR unknown command 'NOSUCH'"} {
		if !bytes.Contains(out, []byte(want)) && !bytes.Contains(out, []byte(strings.TrimPrefix(want, "(error) "))) {
			t.Errorf("interactive session lacks %q:\n%s", want, out)
		}
	}
}

func TestRedisBenchmarkAgainstBinary(t *testing.T) {
	t.Parallel()
	bench := requireTool(t, "redis-benchmark")
	s := startSluice(t)
	host, port := hostPort(t, s.Addr)
	out, err := exec.Command(bench, "-h", host, "-p", port, "-n", "20000", "-c", "20", "-P", "16", "-r", "1000", "-q",
		"RL.TAKE", "bench:__rand_int__", "1").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`([0-9.]+) requests per second`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("redis-benchmark printed no rate:\n%s", out)
	}
	t.Logf("redis-benchmark through embedded sluice: %s requests/s", m[1])
	info, err := s.client(t).Info(context.Background(), "sluice").Result()
	if err != nil {
		t.Fatal(err)
	}
	dm := regexp.MustCompile(`decisions:(\d+)`).FindStringSubmatch(info)
	if dm == nil {
		t.Fatalf("INFO lacks decisions:\n%s", info)
	}
	if n, _ := strconv.Atoi(dm[1]); n < 20000 {
		t.Fatalf("sluice made %d decisions, redis-benchmark sent 20000", n)
	}
}

func TestBadConfigRefusesToStart(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `
policies:
  - name: login
    match: "login:*"
    limit: 5
    rate: 5
    period: 1m
`)
	out, err := exec.Command(binary, "serve", "--listen", "127.0.0.1:0", "--admin", "", "--config", path).CombinedOutput()
	if err == nil {
		t.Fatalf("sluice started with a config lacking on_store_error:\n%s", out)
	}
	for _, want := range []string{path, `"login"`, "on_store_error"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("error does not name %s:\n%s", want, out)
		}
	}
}

func TestSIGHUPReload(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `
defaults:
  on_store_error: local
policies:
  - name: first
    match: "*"
    limit: 10
    rate: 1
    period: 1s
`)
	s := startSluice(t, "--config", path, "--watch-config=false") // SIGHUP alone reloads
	ctx := context.Background()
	c := s.client(t)
	if r, err := take(ctx, c, "k1", 1); err != nil || r.Limit != 10 {
		t.Fatalf("before reload: %+v %v", r, err)
	}
	good := strings.ReplaceAll(`
defaults:
  on_store_error: local
policies:
  - name: second
    match: "*"
    limit: 20
    rate: 1
    period: 1s
`, "\t", "")
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Signal(syscall.SIGHUP)
	if !s.waitLog("config reloaded", 10*time.Second) {
		t.Fatalf("no reload logged:\n%s", s.Logs())
	}
	if r, err := take(ctx, c, "k2", 1); err != nil || r.Limit != 20 {
		t.Fatalf("after reload: %+v %v", r, err)
	}
	if err := os.WriteFile(path, []byte("policies:\n  - name: bad\n    limt: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Signal(syscall.SIGHUP)
	if !s.waitLog("keeping the last good config", 10*time.Second) {
		t.Fatalf("bad reload not logged:\n%s", s.Logs())
	}
	if !strings.Contains(s.Logs(), "limt") {
		t.Errorf("the reload error does not name the field:\n%s", s.Logs())
	}
	if r, err := take(ctx, c, "k3", 1); err != nil || r.Limit != 20 {
		t.Fatalf("after a bad reload: %+v %v", r, err)
	}
}

// SIGTERM: stop accepting, finish, exit 0.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	s := startSluice(t)
	c := s.client(t)
	if _, err := take(context.Background(), c, "k", 1); err != nil {
		t.Fatal(err)
	}
	s.Signal(syscall.SIGTERM)
	if err := s.Wait(15 * time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, s.Logs())
	}
	if !strings.Contains(s.Logs(), "stopped") {
		t.Fatalf("no clean stop logged:\n%s", s.Logs())
	}
}

// redis-cli in a real terminal (a pty, driven by testdata/redis_cli_terminal.py),
// as a newcomer types: it asks COMMAND DOCS at start and shows the hints.
func TestRedisCLIInATerminal(t *testing.T) {
	t.Parallel()
	cli := requireTool(t, "redis-cli")
	py := requireTool(t, "python3")
	s := startSluice(t)
	host, port := hostPort(t, s.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "testdata/redis_cli_terminal.py", cli, host, port,
		"RL.TAKE tty:k 5", "RL.TAKE tty:k 0").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli in a pty: %v\n%s", err, out)
	}
	for _, want := range []string{"3) (integer) 95", `6) "embedded"`, "key [cost]", "(error) ERR cost must be a positive integer"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("terminal session lacks %q:\n%q", want, out)
		}
	}
}

const redisPy = `
import sys, redis
r = redis.Redis(host=sys.argv[1], port=int(sys.argv[2]))
assert r.ping()
v = r.execute_command("RL.TAKE", "py:k", 2)
assert v[:4] == [1, 100, 98, -1] and v[5] == b"embedded", v
try:
    r.execute_command("RL.TAKE", "py:k", "1.5")
    raise SystemExit("no error for a fractional cost")
except redis.ResponseError as e:
    assert "cost must be a positive integer" in str(e), e
p = r.pipeline(transaction=False)
for _ in range(10):
    p.execute_command("RL.TAKE", "py:p", 1)
got = [x[2] for x in p.execute()]
assert got == list(range(99, 89, -1)), got
print("ok")
`

func TestRedisPy(t *testing.T) {
	t.Parallel()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import redis").Run(); err != nil {
		if os.Getenv("CI") != "" && !testing.Short() {
			t.Fatalf("redis-py missing for %s: CI must install python3-redis", py)
		}
		t.Skip("redis-py not installed")
	}
	s := startSluice(t)
	host, port := hostPort(t, s.Addr)
	out, err := exec.Command(py, "-c", redisPy, host, port).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("redis-py: %v\n%s", err, out)
	}
}

// --redis: one plain Redis node instead of a cluster.
func TestSingleRedisNode(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	// One token an hour: a slow test run cannot refill one between takes.
	s := startSluice(t, "--redis", "redis://"+node.Addr, "--config", writeConfig(t, `
policies:
  - name: single
    match: "*"
    limit: 100
    rate: 1
    period: 1h
    on_store_error: closed
`))
	c := s.client(t)
	ctx := context.Background()
	for i, want := range []int64{99, 98, 97} {
		r, err := take(ctx, c, "single", 1)
		if err != nil || r.DecidedBy != "store" || r.Remaining != want {
			t.Fatalf("take %d: %+v %v", i, r, err)
		}
	}
	n, err := node.Client().Exists(ctx, "sluice:{single}").Result()
	if err != nil || n != 1 {
		t.Fatalf("bucket key sluice:{single} not in Redis: %d %v", n, err)
	}
	if err := node.Client().ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if r, err := take(ctx, c, "single", 1); err != nil || r.Remaining != 96 {
		t.Fatalf("after SCRIPT FLUSH: %+v %v", r, err)
	}
}

// RL.HOTKEYS through the binary: a key far above its threshold is listed,
// and its takes are decided by leases.
func TestHotKeysListed(t *testing.T) {
	t.Parallel()
	s := startSluice(t, "--config", writeConfig(t, `
policies:
  - name: api
    match: "*"
    limit: 100000
    rate: 100000
    period: 1s
    on_store_error: closed
    hot:
      mode: lease
      threshold: 100
`))
	c := s.client(t)
	ctx := context.Background()
	by := map[string]int{}
	for range 40 {
		pipe := c.Pipeline()
		cmds := make([]*redis.Cmd, 50)
		for i := range cmds {
			cmds[i] = pipe.Do(ctx, "RL.TAKE", "viral", 1)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range cmds {
			v, _ := cmd.Slice()
			by[v[5].(string)]++
		}
	}
	if by["lease"] == 0 {
		t.Fatalf("no lease decisions for a key at 2,000 requests in a burst: %v", by)
	}
	hot, err := c.Do(ctx, "RL.HOTKEYS").Slice()
	if err != nil || len(hot) != 1 {
		t.Fatalf("RL.HOTKEYS = %v, %v; want one key", hot, err)
	}
	row := hot[0].([]any)
	if row[1] != "viral" || row[3] != "api" || row[5] != "lease" {
		t.Fatalf("RL.HOTKEYS row %v", row)
	}
	info, _ := c.Do(ctx, "RL.INFO", "sluice").Text()
	if !strings.Contains(info, "hot_keys:1") || strings.Contains(info, "lease_claims:0\r") {
		t.Fatalf("RL.INFO lacks the hot key and its claims:\n%s", info)
	}
}

// `sluice` without arguments is the first thing a newcomer runs: it must
// list every command of the server, and only those: the benchmark, the
// labs and the cluster launcher are sluice-lab's.
func TestUsageListsEveryCommand(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), nil, &stdout, &stderr); err == nil {
		t.Fatal("sluice without a command succeeded")
	}
	usage := stderr.String()
	listed := regexp.MustCompile(`(?m)^  (\S+)`).FindAllStringSubmatch(usage, -1)
	var got []string
	for _, m := range listed {
		got = append(got, m[1])
	}
	if want := []string{"serve", "check", "version"}; !slices.Equal(got, want) {
		t.Errorf("usage lists %q, want %q:\n%s", got, want, usage)
	}
}

// The commands that moved to sluice-lab answer, under their old names,
// with one line naming the new spelling, and fail: through run, and
// through the binary (stderr, exit status 1, nothing on stdout).
func TestMovedCommandsPoint(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "soak"}, "'sluice lab soak' moved: run 'sluice-lab soak'"},
		{[]string{"lab", "overload", "--clients", "50"}, "'sluice lab overload' moved: run 'sluice-lab overload'"},
		{[]string{"lab"}, "'sluice lab' moved: run 'sluice-lab <experiment>'"},
		{[]string{"lab", "-h"}, "'sluice lab' moved: run 'sluice-lab <experiment>'"},
		{[]string{"bench", "--quick"}, "'sluice bench' moved: run 'sluice-lab bench'"},
		{[]string{"cluster", "up", "--port", "0"}, "'sluice cluster up' moved: run 'sluice-lab cluster up'"},
		{[]string{"cluster", "down"}, "'sluice cluster down' moved: run 'sluice-lab cluster down'"},
		{[]string{"cluster"}, "'sluice cluster' moved: run 'sluice-lab cluster up|down'"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), c.args, &stdout, &stderr)
		if err == nil || err.Error() != c.want {
			t.Errorf("sluice %s: %v, want %q", strings.Join(c.args, " "), err, c.want)
		}
		if stdout.Len()+stderr.Len() != 0 {
			t.Errorf("sluice %s printed %q %q beside its error", strings.Join(c.args, " "), stdout.String(), stderr.String())
		}
	}
	cmd := exec.Command(binary, "lab", "soak", "--duration", "1m")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("sluice lab soak: %v, want exit status 1", err)
	}
	if got, want := stderr.String(), "sluice: 'sluice lab soak' moved: run 'sluice-lab soak'\n"; got != want || stdout.Len() != 0 {
		t.Errorf("sluice lab soak printed stderr %q stdout %q, want stderr %q", got, stdout.String(), want)
	}
}

// The package comment, what `go doc` shows, lists every command the
// binary has.
func TestPackageDocListsEveryCommand(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	for _, c := range program().Commands {
		if !regexp.MustCompile(`(?m)^\s+sluice ` + regexp.QuoteMeta(c.Name) + `\b`).MatchString(doc) {
			t.Errorf("main.go's package comment has no line for `sluice %s`:\n%s", c.Name, doc)
		}
	}
}
