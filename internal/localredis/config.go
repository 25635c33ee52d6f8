package localredis

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// Config says what to start. The zero value is a 3-primary, 3-replica
// cluster on free ports in a new temporary folder.
type Config struct {
	// Dir is the working folder, with one sub-folder per node (node-0,
	// node-1, …). "" means a new temporary folder, removed by Stop. A given
	// folder is kept; Start clears the nodes.conf and data files of the node
	// sub-folders it uses, and refuses a folder whose state file names a
	// live cluster.
	Dir string

	// Port is the first client port; the nodes use Port, Port+1, … and the
	// cluster bus uses each port + 10000. 0 means free ports chosen at
	// random below the kernel's ephemeral range, with the whole start
	// retried on a lost race for a port.
	Port int

	// Primaries is the number of primaries. 0 means 3, the least that
	// redis-cli --cluster create accepts.
	Primaries int

	// Replicas is the number of replicas per primary. 0 means 1; -1 means
	// none.
	Replicas int

	// NodeTimeout is cluster-node-timeout: how long a node may be
	// unreachable before it is failed over. 0 means 5s. Tests of failover
	// use 1–2s.
	NodeTimeout time.Duration

	// Detach, when true, lets the servers outlive this process (for `sluice
	// cluster up`): they run in their own session. When false, on Linux,
	// every server gets Pdeathsig SIGKILL, so a test binary that crashes
	// leaves nothing behind.
	Detach bool

	// Log receives one line per step (nodes started, cluster created,
	// healthy, failover). nil discards them. It is written from one
	// goroutine at a time.
	Log io.Writer

	// Timeout bounds Start, Restart, WaitHealthy and WaitNewPrimary when
	// their context has no deadline. 0 means 60s.
	Timeout time.Duration

	// RedisServer and RedisCLI are the binaries to run. "" means
	// "redis-server" and "redis-cli" looked up on PATH.
	RedisServer string
	RedisCLI    string

	// Netns, when true, starts every node (primaries and replicas) inside
	// a new network namespace, each with a veth pair of its own to the
	// root namespace, so that Node.SetLink can cut one node's link while
	// the others still answer. A node's Addr is then the address of its
	// veth end (10.79.N.x) and its port is Port+i (Port 0 means 6379).
	// It needs Linux, root and iproute2's ip (Start returns an error
	// wrapping ErrNetns otherwise; see CheckNetns), at most 64 nodes, and
	// not Detach: the namespace is deleted by Stop. Leftover namespaces of
	// dead processes are deleted by the next Start.
	Netns bool
}

// ErrNoRedis is returned (wrapped) by Start, StartSingle and Up when
// redis-server or redis-cli cannot be found.
var ErrNoRedis = errors.New("localredis: redis binaries not found")

// ErrNetns is returned (wrapped, with the reason) by Start and CheckNetns
// when a Config.Netns cluster cannot be made here: not root, no ip
// binary, or not Linux.
var ErrNetns = errors.New("localredis: network namespaces need root")

// ErrPortInUse is returned (wrapped) when a client or cluster-bus port is
// taken by another process.
var ErrPortInUse = errors.New("localredis: port in use")

// ErrRunning is returned (wrapped) by Start and Up when the folder's state
// file names a cluster that is still running.
var ErrRunning = errors.New("localredis: a cluster from this folder is still running")

const (
	defaultPrimaries   = 3
	defaultNodeTimeout = 5 * time.Second
	defaultTimeout     = 60 * time.Second
	busPortOffset      = 10000
)

// settings is a Config with every default applied and the binaries found.
type settings struct {
	Config
	replicas int // resolved: 0 means none
	server   string
	cli      string
	version  [3]int // of redis-server
	ip       string // iproute2's ip, for Netns
	log      *logger
}

func (cfg Config) resolve(needCLI bool) (*settings, error) {
	s := &settings{Config: cfg}
	switch {
	case cfg.Primaries == 0:
		s.Primaries = defaultPrimaries
	case cfg.Primaries < 3:
		return nil, fmt.Errorf("localredis: Primaries must be at least 3 (redis-cli --cluster create needs 3), got %d", cfg.Primaries)
	}
	switch {
	case cfg.Replicas == 0:
		s.replicas = 1
	case cfg.Replicas == -1:
		s.replicas = 0
	case cfg.Replicas < 0:
		return nil, fmt.Errorf("localredis: Replicas must be -1 (none), 0 (default 1) or positive, got %d", cfg.Replicas)
	default:
		s.replicas = cfg.Replicas
	}
	switch {
	case cfg.NodeTimeout == 0:
		s.NodeTimeout = defaultNodeTimeout
	case cfg.NodeTimeout < time.Millisecond:
		return nil, fmt.Errorf("localredis: NodeTimeout must be at least 1ms, got %v", cfg.NodeTimeout)
	}
	if cfg.Timeout == 0 {
		s.Timeout = defaultTimeout
	} else if cfg.Timeout < 0 {
		return nil, fmt.Errorf("localredis: Timeout must not be negative, got %v", cfg.Timeout)
	}
	if cfg.Port < 0 || cfg.Port > 65535-busPortOffset {
		return nil, fmt.Errorf("localredis: Port must be 0 or in 1..%d so that the bus port Port+10000 exists, got %d", 65535-busPortOffset, cfg.Port)
	}
	if cfg.Netns {
		if cfg.Detach {
			return nil, errors.New("localredis: Netns cannot be combined with Detach (or Up): Stop deletes the namespace")
		}
		if n := s.nodeCount(); n > maxNetnsNodes {
			return nil, fmt.Errorf("localredis: Netns allows at most %d nodes (one /30 each in a /24), got %d", maxNetnsNodes, n)
		}
		var err error
		if s.ip, err = netnsTool(); err != nil {
			return nil, err
		}
	}
	var err error
	if s.server, err = lookBin(cfg.RedisServer, "redis-server"); err != nil {
		return nil, err
	}
	if needCLI {
		if s.cli, err = lookBin(cfg.RedisCLI, "redis-cli"); err != nil {
			return nil, err
		}
	}
	if s.version, err = serverVersion(s.server); err != nil {
		return nil, err
	}
	s.log = &logger{w: cfg.Log}
	return s, nil
}

func (s *settings) nodeCount() int { return s.Primaries * (1 + s.replicas) }

// CheckBinaries reports ErrNoRedis, naming the binary, when redis-server
// (or, unless cli is "-", redis-cli) cannot be found; "" means on PATH.
func CheckBinaries(serverBin, cli string) error {
	_, err := lookBin(serverBin, "redis-server")
	if err == nil && cli != "-" {
		_, err = lookBin(cli, "redis-cli")
	}
	return err
}

func lookBin(path, name string) (string, error) {
	if path == "" {
		path = name
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrNoRedis, name, err)
	}
	return p, nil
}

var versionRE = regexp.MustCompile(`v=(\d+)\.(\d+)\.(\d+)`)

func serverVersion(serverBin string) ([3]int, error) {
	out, err := exec.Command(serverBin, "--version").Output()
	if err != nil {
		return [3]int{}, fmt.Errorf("localredis: %s --version: %w", serverBin, err)
	}
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		return [3]int{}, fmt.Errorf("localredis: cannot read the version of %s from %q", serverBin, out)
	}
	var v [3]int
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	return v, nil
}

// logger writes progress lines to an io.Writer that may not be safe for
// concurrent use.
type logger struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *logger) printf(format string, args ...any) {
	if l == nil || l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// One Write per line: a test log writer turns each into one t.Log.
	_, _ = l.w.Write([]byte("localredis: " + fmt.Sprintf(format, args...) + "\n"))
}
