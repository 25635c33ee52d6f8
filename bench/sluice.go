package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// child is a `sluice serve` process started by Run.
type child struct {
	cmd  *exec.Cmd
	addr string

	mu   sync.Mutex
	logs []string // the last lines of its stderr
	done chan struct{}
	err  error
}

// listenRE finds the address in sluice's start-up line
// `msg="sluice listening" addr=127.0.0.1:PORT …`.
var listenRE = regexp.MustCompile(`msg="sluice listening" addr=(\S+)`)

// keepLogLines bounds the child's log kept for error messages.
const keepLogLines = 50

// startChild runs bin as `serve` on a free loopback port in front of seeds
// with the policy file at config, and waits until it listens.
func startChild(ctx context.Context, bin string, seeds []string, config string) (*child, error) {
	args := []string{"serve", "--listen", "127.0.0.1:0", "--admin", "",
		"--cluster", strings.Join(seeds, ","), "--config", config}
	c := &child{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	c.cmd.SysProcAttr = childAttr()
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting %s: %w", bin, err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			c.logs = append(c.logs, line)
			if len(c.logs) > keepLogLines {
				c.logs = c.logs[1:]
			}
			c.mu.Unlock()
			if m := listenRE.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	timer := time.NewTimer(defaultStartupTimeout)
	defer timer.Stop()
	select {
	case c.addr = <-addr:
		return c, nil
	case <-c.done:
		return nil, fmt.Errorf("bench: sluice exited before listening: %v\n%s", c.err, c.log())
	case <-timer.C:
		c.stop()
		return nil, fmt.Errorf("bench: sluice did not listen within %v:\n%s", defaultStartupTimeout, c.log())
	case <-ctx.Done():
		c.stop()
		return nil, ctx.Err()
	}
}

// pid is the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// log is the last lines of the child's stderr.
func (c *child) log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.logs, "\n")
}

// stop ends the child by its pid: SIGTERM, then SIGKILL after 10s.
func (c *child) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// writePolicy writes Policy into dir and returns the file's path.
func writePolicy(dir string) (string, error) {
	path := filepath.Join(dir, "bench.yaml")
	if err := os.WriteFile(path, []byte(Policy), 0o600); err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	return path, nil
}

// front is the sluice under test, seen through its RESP port.
type front struct {
	c       *redis.Client
	addr    string
	pid     int    // 0 when its CPU cannot be read here
	version string // sluice_version of INFO
}

func newFront(ctx context.Context, addr string) (*front, error) {
	f := &front{addr: addr, c: redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true, Protocol: 2})}
	text, err := f.c.Do(ctx, "INFO", "server").Text()
	if err != nil {
		_ = f.c.Close()
		return nil, fmt.Errorf("bench: INFO on sluice %s: %w", addr, err)
	}
	fields := infoFields(text)
	if pid, err := strconv.Atoi(fields["process_id"]); err == nil && isLoopback(addr) && procName(pid) != "" {
		f.pid = pid
	}
	f.version = fields["sluice_version"]
	return f, nil
}

func (f *front) close() { _ = f.c.Close() }

// sanity takes one token of key and checks the reply: 6 elements, the
// first five integers, admitted, decided by the store.
func (f *front) sanity(ctx context.Context, key string) error {
	v, err := f.c.Do(ctx, "RL.TAKE", key, 1).Slice()
	if err != nil {
		return fmt.Errorf("bench: RL.TAKE %s on sluice %s: %w", key, f.addr, err)
	}
	if len(v) != 6 {
		return fmt.Errorf("bench: RL.TAKE %s replied %d elements, want 6: %v", key, len(v), v)
	}
	for i := range 5 {
		if _, ok := v[i].(int64); !ok {
			return fmt.Errorf("bench: RL.TAKE %s: element %d is %T, want an integer: %v", key, i+1, v[i], v)
		}
	}
	if v[0] != int64(1) || v[5] != "store" {
		return fmt.Errorf("bench: RL.TAKE %s = %v: want admitted (1) and decided by store; the benchmark needs a policy that admits everything and a reachable cluster", key, v)
	}
	return nil
}

// frontStats are sluice's counters that a run checks.
type frontStats struct {
	decisions, byStore, byLease, errorReplies int64
}

var errNoStats = errors.New("bench: sluice INFO lacks decisions or decided_by_store")

func (f *front) stats(ctx context.Context) (frontStats, error) {
	text, err := f.c.Do(ctx, "INFO").Text()
	if err != nil {
		return frontStats{}, fmt.Errorf("bench: INFO on sluice: %w", err)
	}
	m := infoFields(text)
	var st frontStats
	var err1, err2 error
	st.decisions, err1 = strconv.ParseInt(m["decisions"], 10, 64)
	st.byStore, err2 = strconv.ParseInt(m["decided_by_store"], 10, 64)
	if err1 != nil || err2 != nil {
		return frontStats{}, errNoStats
	}
	st.errorReplies, _ = strconv.ParseInt(m["total_error_replies"], 10, 64)
	st.byLease, _ = strconv.ParseInt(m["decided_by_lease"], 10, 64) // 0 when absent
	return st, nil
}
