package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The envoyproxy/ratelimit peer: Envoy's own rate-limit service, on the
// bench's Redis Cluster, driven by the gRPC door's generator (grpcCaller:
// domain "bench", one descriptor key=<key>).
const (
	PeerRatelimit = "ratelimit"
	// RatelimitModule is what --peer ratelimit builds when no binary is
	// given or on PATH (as "ratelimit"): built with `go install` into a
	// scratch directory, never a dependency of sluice.
	RatelimitModule = "github.com/envoyproxy/ratelimit/src/service_cmd@v1.4.1-0.20260122083618-3fb702589d36"
	// RatelimitConfig is its rule for the bench's descriptors: every value
	// of key is its own counter, a fixed window of a second that admits
	// a billion, as sluice's bench policy (a token bucket of a billion a
	// second) admits everything.
	RatelimitConfig = `domain: bench
descriptors:
  - key: key
    rate_limit:
      unit: second
      requests_per_unit: 1000000000
`
)

var ratelimitBuild = peerBuild{path: "ratelimit", module: RatelimitModule, installed: "service_cmd"}

// ratelimitEnv is envoyproxy/ratelimit's settings (src/settings): the
// cluster at seeds, its config under root, every port on loopback, its
// stats off (DISABLE_STATS: a null sink; USE_STATSD=false alone logs
// every stat it flushes, at some 150 µs of CPU a decision here); its
// Redis pool and pipelining at their defaults (REDIS_POOL_SIZE 10 per
// node, REDIS_PIPELINE_WINDOW 0: radix's implicit pipelining).
func ratelimitEnv(seeds []string, root, grpcPort, httpPort, debugPort string) []string {
	return []string{
		"REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE=cluster", "REDIS_URL=" + strings.Join(seeds, ","),
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"USE_STATSD=false", "DISABLE_STATS=true", "LOG_LEVEL=warn",
		"HOST=127.0.0.1", "PORT=" + httpPort, "GRPC_HOST=127.0.0.1", "GRPC_PORT=" + grpcPort,
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + debugPort,
	}
}

// peerProc is a peer process we started: its pid, and stop, which ends
// it by that pid.
type peerProc struct {
	pid  int
	stop func()
	logs *tailBuffer
	done chan struct{}
}

// startPeer runs bin with env added, its output kept for errors.
func startPeer(bin string, env []string) (*peerProc, error) {
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	p := &peerProc{logs: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p.pid = cmd.Process.Pid
	go func() { _ = cmd.Wait(); close(p.done) }()
	p.stop = func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
	}
	return p, nil
}

// exited is the peer's error when it has exited, else nil.
func (p *peerProc) exited(name string) error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %s", name, tail(p.logs.String(), 20))
	default:
		return nil
	}
}

// loopbackPorts returns n different ports free on 127.0.0.1 now: each is
// held until all are chosen (one closed before the next is asked for
// can come back again).
func loopbackPorts(n int) ([]string, error) {
	var ports []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		ports = append(ports, port)
	}
	return ports, nil
}

// tailBuffer keeps the last max bytes written to it: a peer's output,
// for its error messages, without holding all of it.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// startRatelimit runs envoyproxy/ratelimit on seeds with RatelimitConfig
// under a scratch directory, and waits until its health check passes and
// a call gets the bench's limit; it returns its gRPC address.
func startRatelimit(ctx context.Context, bin string, seeds []string) (string, *peerProc, error) {
	root, err := os.MkdirTemp("", "sluice-bench-ratelimit-")
	if err != nil {
		return "", nil, err
	}
	dir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.yaml"), []byte(RatelimitConfig), 0o644); err != nil {
		return "", nil, err
	}
	ports, err := loopbackPorts(3)
	if err != nil {
		return "", nil, err
	}
	p, err := startPeer(bin, ratelimitEnv(seeds, root, ports[0], ports[1], ports[2]))
	if err != nil {
		return "", nil, err
	}
	stop := p.stop
	p.stop = func() { stop(); _ = os.RemoveAll(root) }
	addr := "127.0.0.1:" + ports[0]
	if err := ratelimitReady(ctx, p, addr, "http://127.0.0.1:"+ports[1]+"/healthcheck"); err != nil {
		p.stop()
		return "", nil, fmt.Errorf("bench: envoyproxy/ratelimit at %s: %w", addr, err)
	}
	return addr, p, nil
}

// ratelimitReady polls the peer's health check, then a call, until it
// answers with the bench's limit (its config is loaded).
func ratelimitReady(ctx context.Context, p *peerProc, addr, health string) error {
	c, err := dialGRPC(addr)
	if err != nil {
		return err
	}
	defer c.close()
	return poll(ctx, 50*time.Millisecond, 30*time.Second, func() (bool, error) {
		if err := p.exited("ratelimit"); err != nil {
			return false, err
		}
		resp, err := http.Get(health)
		if err != nil {
			return false, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, nil
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return c.take(cctx, "ready") == nil, nil
	})
}

// runRatelimit starts envoyproxy/ratelimit on the run's cluster, drives
// it with the gRPC door's generator, with its CPU and the primaries' read
// around the run, and stops it.
func (f *frontRun) runRatelimit(ctx context.Context) (FrontRow, error) {
	bin, err := peerBinary(ctx, ratelimitBuild, f.cfg.PeerBin, f.rig.logf)
	if err != nil {
		return FrontRow{}, err
	}
	addr, p, err := startRatelimit(ctx, bin, f.rig.seeds)
	if err != nil {
		return FrontRow{}, err
	}
	defer p.stop()
	f.rig.logf("envoyproxy/ratelimit %s serving gRPC on %s", bin, addr)
	row, err := f.measured(ctx, p.pid, func(ctx context.Context) (FrontRow, error) { return driveDoor(ctx, DoorGRPC, addr, f.cfg) })
	if err != nil {
		return FrontRow{}, fmt.Errorf("envoyproxy/ratelimit: %w", err)
	}
	row.Door, row.Store, row.StoreNote = "envoyproxy/ratelimit (peer, gRPC, INCRBY + EXPIRE in the same cluster)", -1, "— (its own keys)"
	return row, nil
}

// PeerRatio is sluice's gRPC door over the envoyproxy/ratelimit peer of
// the same run: requests/s, service CPU and Redis CPU per decision.
type PeerRatio struct{ RPS, Service, Redis float64 }

// PeerRatios is the run's PeerRatio; nil when it has not both rows.
func (rep *FrontReport) PeerRatios() *PeerRatio {
	var door, peer *FrontRow
	for i := range rep.Rows {
		switch r := &rep.Rows[i]; {
		case r.Door == DoorGRPC:
			door = r
		case strings.HasPrefix(r.Door, "envoyproxy/ratelimit"):
			peer = r
		}
	}
	if door == nil || peer == nil {
		return nil
	}
	return &PeerRatio{ratio(door.RPS, peer.RPS), ratio(door.ServiceCPU, peer.ServiceCPU), ratio(door.RedisCPU, peer.RedisCPU)}
}
