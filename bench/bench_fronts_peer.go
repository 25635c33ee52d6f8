package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// The peer RunFronts can run beside sluice's doors.
const (
	PeerGubernator = "gubernator"
	// GubernatorModule is what --peer gubernator builds when no binary is
	// given or on PATH: built with `go install` into a scratch directory,
	// never a dependency of sluice.
	GubernatorModule = "github.com/gubernator-io/gubernator/v2/cmd/gubernator@v2.13.0"
)

// peerBuild is how a peer's binary is found: its name on PATH, else
// module built with `go install` into the user's cache directory, where
// it is the file installed.
type peerBuild struct {
	path, module, installed string
}

var gubernatorBuild = peerBuild{path: "gubernator", module: GubernatorModule, installed: "gubernator"}

// gubernatorBinary finds gubernator: bin when set, else on PATH, else
// built once into the user's cache directory with `go install`.
func gubernatorBinary(ctx context.Context, bin string, progress func(string, ...any)) (string, error) {
	return peerBinary(ctx, gubernatorBuild, bin, progress)
}

// peerBinary finds the binary of pb: bin when set, else on PATH, else
// built once into the user's cache directory with `go install`.
func peerBinary(ctx context.Context, pb peerBuild, bin string, progress func(string, ...any)) (string, error) {
	if bin != "" {
		return bin, nil
	}
	if p, err := exec.LookPath(pb.path); err == nil {
		return p, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "sluice-bench", "peers")
	p := filepath.Join(dir, pb.installed)
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	progress("building %s into %s (go install; minutes the first time)", pb.module, dir)
	cmd := exec.CommandContext(ctx, "go", "install", pb.module)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-mod=mod")
	cmd.Dir = os.TempDir() // outside sluice's module: not a dependency
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("bench: go install %s: %v\n%s", pb.module, err, tail(string(out), 20))
	}
	return p, nil
}

// startGubernator runs one gubernator node on loopback ports, its
// telemetry off, and waits for its health check; p.stop ends it by its
// pid.
func startGubernator(ctx context.Context, bin string) (httpAddr string, p *peerProc, err error) {
	ports, err := loopbackPorts(2)
	if err != nil {
		return "", nil, err
	}
	grpcAddr, httpAddr := "127.0.0.1:"+ports[0], "127.0.0.1:"+ports[1]
	p, err = startPeer(bin, []string{"GUBER_GRPC_ADDRESS=" + grpcAddr, "GUBER_HTTP_ADDRESS=" + httpAddr,
		"GUBER_ADVERTISE_ADDRESS=" + grpcAddr, "OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true"})
	if err != nil {
		return "", nil, err
	}
	err = poll(ctx, 50*time.Millisecond, 30*time.Second, func() (bool, error) {
		if err := p.exited("gubernator"); err != nil {
			return false, err
		}
		resp, err := http.Get("http://" + httpAddr + "/v1/HealthCheck")
		if err != nil {
			return false, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		p.stop()
		return "", nil, fmt.Errorf("bench: gubernator at %s: %w", httpAddr, err)
	}
	return httpAddr, p, nil
}

// gubernatorCaller asks gubernator for one decision of the bench's bucket
// (a limit of a billion a second: everything admitted) over its HTTP API,
// on a keep-alive connection of its own.
type gubernatorCaller struct {
	c   *http.Client
	url string
}

func dialGubernator(addr string) (caller, error) {
	return gubernatorCaller{c: keepAlive(), url: "http://" + addr + "/v1/GetRateLimits"}, nil
}

func (g gubernatorCaller) take(ctx context.Context, key string) error {
	body := `{"requests":[{"name":"bench","unique_key":` + strconv.Quote(key) + `,"hits":1,"limit":1000000000,"duration":1000}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url, bytes.NewBufferString(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.c.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"UNDER_LIMIT"`)) {
		return fmt.Errorf("gubernator: %s %s", resp.Status, b)
	}
	return nil
}

func (g gubernatorCaller) close() { g.c.CloseIdleConnections() }
