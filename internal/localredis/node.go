package localredis

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Node is one redis-server process started by this package: a cluster node
// or a single server.
//
// Its methods are safe for concurrent use. The exported fields are fixed,
// except Pid, which Restart changes: read it from the goroutine that
// restarts the node.
type Node struct {
	// Addr is "127.0.0.1:Port", or in a Config.Netns cluster "host:Port"
	// with host the address of the node's veth end in the namespace.
	Addr string
	// Port is the client port; a cluster node's bus port is Port+10000.
	Port int
	// Pid is the process id of the running server.
	Pid int
	// Dir is the node's working folder: nodes.conf, redis.log (the server's
	// log) and redis.out (its stdout and stderr).
	Dir string
	// ID is the cluster node ID, or "" for a single server. It survives
	// Restart, because it lives in nodes.conf.
	ID string

	s       *settings
	cluster bool
	rmDir   string // removed by Stop; set for a single server in a temp dir
	host    string // the address it binds: 127.0.0.1, or its veth end's
	link    *veth  // its link to the root namespace; nil outside a Netns cluster

	// Set before the first spawn, for the nodes of a Sentinel group.
	bin      string   // the binary; "" means s.server
	head     []string // arguments before the options: a sentinel's config file
	tail     []string // arguments after them: --replicaof, passwords
	password string   // requirepass, for the readiness check and Client

	mu     sync.Mutex // serialises process changes
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has exited
	paused bool

	clientMu sync.Mutex
	client   *redis.Client
}

func newNode(s *settings, dir string, port int, clusterMode bool) *Node {
	return newNodeOn(s, dir, "127.0.0.1", port, clusterMode)
}

func newNodeOn(s *settings, dir, host string, port int, clusterMode bool) *Node {
	return &Node{
		Addr:    net.JoinHostPort(host, strconv.Itoa(port)),
		Port:    port,
		Dir:     dir,
		s:       s,
		cluster: clusterMode,
		host:    host,
	}
}

func (n *Node) args() []string {
	a := append(slices.Clone(n.head),
		"--port", strconv.Itoa(n.Port),
		"--bind", n.host,
		"--protected-mode", "no",
		"--dir", n.Dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--logfile", filepath.Join(n.Dir, "redis.log"),
		// Start a replica's full sync at once instead of waiting 5s for
		// more replicas to share it.
		"--repl-diskless-sync-delay", "0",
	)
	if n.s.version[0] >= 7 {
		a = append(a,
			// Without persistence, keep no RDB left over from a sync, so
			// that a restarted node really comes back empty.
			"--rdb-del-sync-files", "yes",
			// SIGTERM exits at once instead of waiting up to 10s for
			// lagging replicas: Stop kills the replicas too.
			"--shutdown-on-sigterm", "nosave now",
		)
		// DEBUG SLEEP and friends, so a test can make a node slow without
		// pausing it: from loopback only, or, in a namespace, from this
		// host's end of the veth (nothing else reaches it).
		if n.link != nil {
			a = append(a, "--enable-debug-command", "yes")
		} else {
			a = append(a, "--enable-debug-command", "local")
		}
	}
	if n.cluster {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(n.s.NodeTimeout.Milliseconds(), 10),
			// A replica may be promoted however long its link has been
			// down, so a killed primary is always failed over.
			"--cluster-replica-validity-factor", "0",
		)
		if n.link != nil {
			// Inside the namespace every node's address is local, so a
			// bus connection to node B leaves from B's own address:
			// without an announced address the nodes learn wrong ones.
			a = append(a, "--cluster-announce-ip", n.host)
		}
	}
	return append(a, n.tail...)
}

// spawn starts the server process. The caller holds n.mu.
func (n *Node) spawn() error {
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return fmt.Errorf("localredis: %w", err)
	}
	out, err := os.OpenFile(filepath.Join(n.Dir, "redis.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("localredis: %w", err)
	}
	defer out.Close() // the child has its own copy
	bin := n.s.server
	if n.bin != "" {
		bin = n.bin
	}
	cmd := exec.Command(bin, n.args()...)
	if n.link != nil {
		cmd = n.link.ns.command(bin, n.args()...)
	}
	cmd.Dir = n.Dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr(n.s.Detach)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("localredis: start %s: %w", bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // reaps the child; the exit shows in the logs
		close(done)
	}()
	n.cmd, n.done, n.paused, n.Pid = cmd, done, false, cmd.Process.Pid
	return nil
}

// waitReady polls until the server on n.Port is this node's process and
// answers, or the process exits (an error wrapping ErrPortInUse when it
// could not bind), or ctx ends.
func (n *Node) waitReady(ctx context.Context) error {
	n.mu.Lock()
	pid, done := n.Pid, n.done
	n.mu.Unlock()
	var last error
	for {
		select {
		case <-done:
			return n.exitError()
		default:
		}
		got, err := serverPidAuth(ctx, n.Addr, n.password)
		if err == nil && got == pid {
			return nil
		}
		if err == nil {
			// Someone else answers on our port: we lost the race for it.
			select {
			case <-done:
				return n.exitError()
			case <-time.After(time.Second):
				return fmt.Errorf("%w: %s answered by pid %d, not by our pid %d", ErrPortInUse, n.Addr, got, pid)
			}
		}
		last = err
		select {
		case <-done:
			return n.exitError()
		case <-ctx.Done():
			return fmt.Errorf("localredis: %s not ready: %w (last: %v)", n.Addr, ctx.Err(), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (n *Node) exitError() error {
	tail := n.LogTail(15)
	if strings.Contains(tail, "Address already in use") {
		return fmt.Errorf("%w: %s (or its bus port) taken; redis.log:\n%s", ErrPortInUse, n.Addr, tail)
	}
	return fmt.Errorf("localredis: redis-server %s exited at start; logs:\n%s", n.Addr, tail)
}

// serverPid asks the server at addr for its process_id with a raw INFO
// command: no pool and no dial back-off between polls.
func serverPid(ctx context.Context, addr string) (int, error) {
	return serverPidAuth(ctx, addr, "")
}

// serverPidAuth is serverPid on a server with requirepass password ("" for
// none).
func serverPidAuth(ctx context.Context, addr, password string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	req := "*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"
	if password != "" {
		req = fmt.Sprintf("*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(password), password) + req
	}
	if _, err := io.WriteString(conn, req); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)
	if password != "" {
		ok, err := r.ReadString('\n')
		if err != nil {
			return 0, err
		}
		if ok = strings.TrimRight(ok, "\r\n"); ok != "+OK" {
			return 0, fmt.Errorf("AUTH: %s", ok)
		}
	}
	head, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	head = strings.TrimRight(head, "\r\n")
	if !strings.HasPrefix(head, "$") {
		return 0, fmt.Errorf("INFO: %s", head) // e.g. -LOADING
	}
	size, err := strconv.Atoi(head[1:])
	if err != nil || size < 0 {
		return 0, fmt.Errorf("INFO: bad reply %q", head)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	v, ok := parseInfo(string(body))["process_id"]
	if !ok {
		return 0, errors.New("INFO: no process_id")
	}
	return strconv.Atoi(v)
}

// parseInfo reads "key:value" lines of INFO or CLUSTER INFO.
func parseInfo(s string) map[string]string {
	m := make(map[string]string)
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// Running reports whether the server process is alive (perhaps paused).
func (n *Node) Running() bool { return locked(n, n.runningLocked) }

// locked is f's result, f run holding n.mu.
func locked[T any](n *Node, f func() T) T {
	n.mu.Lock()
	defer n.mu.Unlock()
	return f()
}

func (n *Node) runningLocked() bool {
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Paused reports whether Pause stopped the server and Resume has not yet
// continued it.
func (n *Node) Paused() bool {
	return locked(n, func() bool { return n.paused && n.runningLocked() })
}

// live reports whether the node can answer: running, not paused and, in
// a Netns cluster, with its link up.
func (n *Node) live() bool {
	return locked(n, func() bool { return n.runningLocked() && !n.paused && (n.link == nil || !n.link.down) })
}

// LinkUp reports whether the node's link to the root namespace is up:
// always true outside a Config.Netns cluster.
func (n *Node) LinkUp() bool {
	return locked(n, func() bool { return n.link == nil || !n.link.down })
}

// SetLink sets the node's link to the root namespace down (false) or up
// (true), in a Config.Netns cluster. Down, what this process (or any
// other of the root namespace: a test, sluice) sends to the node is
// dropped without a reset or an ICMP error: its sockets stay open and no
// reply comes, as behind a dead switch port, until the link is up again
// and TCP retransmits. The node keeps running and still reaches the other
// nodes, which reach it too (inside the namespace every node's address is
// local): it is cut from its clients, not from its cluster, so no
// failover follows however long the cut lasts. A node whose link is down
// counts as not live for WaitHealthy, like a paused one. Outside a Netns
// cluster SetLink returns an error.
func (n *Node) SetLink(up bool) error {
	verb := "cut"
	if up {
		verb = "healed"
	}
	if n.link == nil {
		return fmt.Errorf("localredis: SetLink %s: not in a network namespace (Config.Netns)", n.Addr)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.link.set(up); err != nil {
		return err
	}
	n.link.down = !up
	n.s.log.printf("%s the link of %s", verb, n.Addr)
	return nil
}

// Pause stops the server with SIGSTOP: its sockets stay open but it
// answers nothing, like a node stuck in a long GC or a frozen VM.
func (n *Node) Pause() error { return n.setPaused(true) }

// Resume continues a paused server with SIGCONT.
func (n *Node) Resume() error { return n.setPaused(false) }

// setPaused sends SIGSTOP (paused) or SIGCONT and notes the state.
func (n *Node) setPaused(paused bool) error {
	verb, sig := "resume", sigCont
	if paused {
		verb, sig = "pause", sigStop
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.runningLocked() {
		return fmt.Errorf("localredis: %s %s: not running", verb, n.Addr)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("localredis: %s %s: %w", verb, n.Addr, err)
	}
	n.paused = paused
	n.s.log.printf("%sd %s (pid %d)", verb, n.Addr, n.Pid)
	return nil
}

// Kill ends the server with SIGKILL, as a crash would, and waits until it
// has exited. Killing a node that is not running does nothing.
func (n *Node) Kill() error { return locked(n, n.killLocked) }

func (n *Node) killLocked() error {
	if !n.runningLocked() {
		return nil
	}
	if err := n.cmd.Process.Signal(sigKill); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("localredis: kill %s: %w", n.Addr, err)
	}
	select {
	case <-n.done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("localredis: kill %s: pid %d still running 10s after SIGKILL", n.Addr, n.Pid)
	}
	n.paused = false
	n.s.log.printf("killed %s (pid %d)", n.Addr, n.Pid)
	return nil
}

// terminate ends the server with SIGTERM (and SIGCONT, should it be
// paused), then SIGKILL if it has not exited after grace.
func (n *Node) terminate(grace time.Duration) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.runningLocked() {
		return nil
	}
	_ = n.cmd.Process.Signal(sigTerm)
	if n.paused {
		_ = n.cmd.Process.Signal(sigCont)
	}
	select {
	case <-n.done:
		n.paused = false
		return nil
	case <-time.After(grace):
		return n.killLocked()
	}
}

// Restart starts the server again on the same port and folder, after
// killing it if it still runs. A cluster node keeps its identity and its
// view of the cluster from nodes.conf; with persistence off it has no data
// and no scripts. Restart returns once the server answers; call
// Cluster.WaitHealthy to wait for the cluster to take it back.
//
// In a Config.Netns cluster, a node whose link is down is not restarted
// (an error, and nothing done): this process could not see it answer.
func (n *Node) Restart(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx, n.s.Timeout)
	defer cancel()
	n.mu.Lock()
	if n.link != nil && n.link.down {
		n.mu.Unlock()
		return fmt.Errorf("localredis: restart %s: its link is down; SetLink(true) first", n.Addr)
	}
	if err := n.killLocked(); err != nil {
		n.mu.Unlock()
		return err
	}
	removeData(n.Dir)
	err := n.spawn()
	n.mu.Unlock()
	if err != nil {
		return err
	}
	if err := n.waitReady(ctx); err != nil {
		return err
	}
	n.s.log.printf("restarted %s (pid %d)", n.Addr, n.Pid)
	return nil
}

// Stop ends the server with SIGTERM, then SIGKILL after a few seconds, and
// waits until it has exited. For a server from StartSingle it also closes
// the client and removes the temporary folder, if it made one.
func (n *Node) Stop() error {
	err := n.terminate(5 * time.Second)
	if n.rmDir != "" {
		n.closeClient()
		if rmErr := os.RemoveAll(n.rmDir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("localredis: %w", rmErr))
		}
	}
	return err
}

// Client returns a go-redis client for this node alone, made on first use
// and closed by Stop. It speaks RESP2 and honours context deadlines. For a
// cluster node it does not follow MOVED redirections; see
// Cluster.ClusterClient.
func (n *Node) Client() *redis.Client {
	n.clientMu.Lock()
	defer n.clientMu.Unlock()
	if n.client == nil {
		n.client = redis.NewClient(&redis.Options{
			Addr:                     n.Addr,
			Password:                 n.password,
			Protocol:                 2,
			DisableIdentity:          true,
			DialTimeout:              time.Second,
			ReadTimeout:              2 * time.Second,
			WriteTimeout:             2 * time.Second,
			ContextTimeoutEnabled:    true,
			MaintNotificationsConfig: maintOff(),
		})
	}
	return n.client
}

func (n *Node) closeClient() {
	n.clientMu.Lock()
	defer n.clientMu.Unlock()
	if n.client != nil {
		_ = n.client.Close()
	}
}

// LogTail returns the last lines of the node's redis.log and redis.out, for
// error messages and failed tests.
func (n *Node) LogTail(lines int) string {
	var b strings.Builder
	for _, name := range []string{"redis.log", "redis.out"} {
		data, err := os.ReadFile(filepath.Join(n.Dir, name))
		if err != nil || len(data) == 0 {
			continue
		}
		all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(all) > lines {
			all = all[len(all)-lines:]
		}
		fmt.Fprintf(&b, "--- %s/%s\n%s\n", n.Dir, name, strings.Join(all, "\n"))
	}
	return b.String()
}

// removeData deletes what a server could load at start or a previous
// cluster left behind, so that a node starts empty.
func removeData(dir string) {
	for _, name := range []string{"dump.rdb", "appendonly.aof", "appendonlydir"} {
		_ = os.RemoveAll(filepath.Join(dir, name))
	}
	if temps, err := filepath.Glob(filepath.Join(dir, "temp-*.rdb")); err == nil {
		for _, t := range temps {
			_ = os.Remove(t)
		}
	}
}

// maintOff turns off go-redis's maintenance notifications, which a local
// server does not send: the clients of this package then skip the
// handshake that asks for them.
func maintOff() *maintnotifications.Config {
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
