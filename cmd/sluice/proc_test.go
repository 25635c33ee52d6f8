package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// binary is the sluice binary built once by TestMain: the tests drive the
// real program, as users do.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "sluice")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building sluice:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one running sluice process.
type proc struct {
	t    testing.TB
	cmd  *exec.Cmd
	Addr string

	mu   sync.Mutex
	logs strings.Builder
	done chan struct{}
	err  error
}

var listenRE = regexp.MustCompile(`msg="sluice listening" addr=(\S+)`)

// startSluice runs `sluice serve` with args on a free port and waits until it
// listens. The process is stopped (SIGTERM, then SIGKILL) at cleanup.
func startSluice(t testing.TB, args ...string) *proc {
	t.Helper()
	full := append([]string{"serve", "--listen", "127.0.0.1:0", "--admin", ""}, args...)
	p := &proc{t: t, cmd: exec.Command(binary, full...), done: make(chan struct{})}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			p.mu.Unlock()
			if m := listenRE.FindStringSubmatch(line); m != nil {
				addr <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("sluice %v log:\n%s", full, p.Logs())
		}
	})
	select {
	case p.Addr = <-addr:
	case <-p.done:
		t.Fatalf("sluice exited before listening: %v\n%s", p.err, p.Logs())
	case <-time.After(20 * time.Second):
		t.Fatalf("sluice did not listen within 20s:\n%s", p.Logs())
	}
	return p
}

// Logs returns what the process has written to stderr so far.
func (p *proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// Signal sends sig to the process.
func (p *proc) Signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// Wait waits for the process to exit, at most d.
func (p *proc) Wait(d time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		return fmt.Errorf("still running after %v", d)
	}
}

// Stop ends the process: SIGTERM, then SIGKILL after 10s.
func (p *proc) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if p.Wait(10*time.Second) != nil {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// waitLog polls the process log for a line containing s.
func (p *proc) waitLog(s string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if strings.Contains(p.Logs(), s) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// client returns a go-redis client of the process, closed at cleanup.
func (p *proc) client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: p.Addr, PoolSize: 64, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// reply is one RL.TAKE reply.
type reply struct {
	Allowed                          bool
	Limit, Remaining, Retry, ResetMs int64
	DecidedBy                        string
}

func take(ctx context.Context, c *redis.Client, key string, cost int64) (reply, error) {
	v, err := c.Do(ctx, "RL.TAKE", key, cost).Slice()
	if err != nil {
		return reply{}, err
	}
	if len(v) != 6 {
		return reply{}, fmt.Errorf("reply has %d elements, want 6: %v", len(v), v)
	}
	var r reply
	n := make([]int64, 5)
	for i := range 5 {
		x, ok := v[i].(int64)
		if !ok {
			return reply{}, fmt.Errorf("element %d is %T, want integer", i+1, v[i])
		}
		n[i] = x
	}
	by, ok := v[5].(string)
	if !ok {
		return reply{}, fmt.Errorf("element 6 is %T, want bulk string", v[5])
	}
	r = reply{Allowed: n[0] == 1, Limit: n[1], Remaining: n[2], Retry: n[3], ResetMs: n[4], DecidedBy: by}
	return r, nil
}

// writeConfig writes a policy file into a temp dir and returns its path.
func writeConfig(t testing.TB, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// requireTool finds a binary; in CI a missing one fails the test. Under
// -short a missing one skips it, and redis-server (a store) always does.
func requireTool(t testing.TB, name string) string {
	t.Helper()
	if name == "redis-server" {
		redistest.SkipShort(t, name)
	}
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" && !testing.Short() {
			t.Fatalf("%s not found on PATH: CI must install redis-tools", name)
		}
		t.Skipf("%s not found on PATH", name)
	}
	return path
}
