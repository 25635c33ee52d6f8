package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is a `sluice serve` process started by the rig.
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
func startChild(ctx context.Context, bin string, seeds []string, config string, extra ...string) (*child, error) {
	args := []string{"serve", "--listen", "127.0.0.1:0", "--admin", "",
		"--cluster", strings.Join(seeds, ","), "--config", config}
	args = append(args, extra...)
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

// logged waits up to d for a line of the child's log that re matches and
// returns its first group: the address a door logged ("http listening"
// addr=…).
func (c *child) logged(re *regexp.Regexp, d time.Duration) (string, error) {
	deadline := time.Now().Add(d)
	for {
		c.mu.Lock()
		for _, line := range c.logs {
			if m := re.FindStringSubmatch(line); m != nil {
				c.mu.Unlock()
				return m[1], nil
			}
		}
		c.mu.Unlock()
		if time.Now().After(deadline) {
			return "", fmt.Errorf("bench: sluice logged no line matching %s within %v:\n%s", re, d, c.log())
		}
		time.Sleep(10 * time.Millisecond) // polling interval
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
