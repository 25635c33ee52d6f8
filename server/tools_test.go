package server

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// tool returns the path of a Redis command-line tool. Without it the test
// is skipped, except under CI, where a missing tool is a failure (but for
// -short: the unit tier needs nothing installed).
func tool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" && !testing.Short() {
			t.Fatalf("%s is not installed and CI is set: install redis-tools", name)
		}
		t.Skipf("%s is not installed", name)
	}
	return path
}

// run runs a tool with stdin and returns its stdout and stderr.
func run(t *testing.T, stdin string, name string, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRedisCLIOneShot(t *testing.T) {
	t.Parallel()
	cli := tool(t, "redis-cli")
	_, addr := start(t, Config{})
	p := port(t, addr)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"RL.TAKE", "k", "1"}, "1\n10\n9\n-1\n1000\nstore\n"},
		{[]string{"rl.peek", "k"}, "1\n10\n9\n-1\n1000\nstore\n"},
		// redis-cli ends an error with an empty line, for Redis too.
		{[]string{"RL.TAKE", "k", "x"}, "ERR cost must be a positive integer\n\n"},
		{[]string{"PING"}, "PONG\n"},
		{[]string{"nosuch"}, "ERR unknown command 'nosuch', with args beginning with: \n\n"},
	}
	for _, tt := range tests {
		got, _ := run(t, "", cli, append([]string{"-p", p}, tt.args...)...)
		if got != tt.want {
			t.Errorf("redis-cli %s:\n got %q\nwant %q", strings.Join(tt.args, " "), got, tt.want)
		}
	}
}

func TestRedisCLIAuth(t *testing.T) {
	t.Parallel()
	cli := tool(t, "redis-cli")
	_, addr := start(t, Config{RequirePass: "s3cret"})
	p := port(t, addr)
	if got, _ := run(t, "", cli, "-p", p, "RL.TAKE", "k"); got != "NOAUTH Authentication required.\n\n" {
		t.Errorf("without a password: %q", got)
	}
	if got, _ := run(t, "", cli, "-p", p, "--no-auth-warning", "-a", "s3cret", "RL.TAKE", "k"); got != "1\n10\n9\n-1\n1000\nstore\n" {
		t.Errorf("with -a: %q", got)
	}
}

// TestRedisCLIInteractive drives redis-cli's interactive mode through its
// standard input; it starts by fetching COMMAND DOCS for its hints.
func TestRedisCLIInteractive(t *testing.T) {
	t.Parallel()
	cli := tool(t, "redis-cli")
	srv, addr := start(t, Config{})
	stdin := "RL.TAKE k 2\nRL.PEEK k\nRL.TAKE\nCLIENT SETNAME cli\nCLIENT GETNAME\nSELECT 0\nHELLO 3\nPING\n"
	stdout, stderr := run(t, stdin, cli, "-p", port(t, addr))
	want := strings.Join([]string{
		"1", "10", "8", "-1", "2000", "store",
		"1", "10", "8", "-1", "2000", "store",
		"ERR wrong number of arguments for 'rl.take' command", "",
		"OK", "cli", "OK",
		// HELLO 3 switches redis-cli's connection to RESP3: a map.
		"server sluice", "version 7.0.0", "proto 3", "id 1", "mode standalone", "role master", "modules ",
		"PONG",
	}, "\n") + "\n"
	if stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout, want)
	}
	if stderr != "" {
		t.Errorf("stderr: %q", stderr)
	}
	// redis-cli's own start-up commands (COMMAND DOCS for 7.0) must not
	// have failed: the only error reply is the one typed above.
	if st := srv.Stats(); st.CommandsProcessed < 9 || st.ErrorReplies != 1 {
		t.Errorf("Stats = %+v, want at least 9 commands (COMMAND DOCS and 8 typed), 1 error", st)
	}
}

func TestRedisBenchmark(t *testing.T) {
	t.Parallel()
	bench := tool(t, "redis-benchmark")
	fake := newFake(1 << 40)
	_, addr := start(t, Config{Decider: fake})
	stdout, stderr := run(t, "", bench, "-p", port(t, addr), "-n", "2000", "-c", "10", "-P", "16", "RL.TAKE", "k", "1")
	if got := fake.takes.Load(); got < 2000 {
		t.Errorf("Decider saw %d takes, want >= 2000\nstdout:\n%s", got, stdout)
	}
	if strings.Contains(stderr, "WARN") || strings.Contains(stderr, "ERR") {
		t.Errorf("redis-benchmark complained:\n%s", stderr)
	}
	if fake.maxBatch() < 2 {
		t.Errorf("largest Decide batch = %d, want pipelines of 16 batched", fake.maxBatch())
	}
}
