package app

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer the logger and the test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startLogged loads args as `sluice serve` would (embedded store), starts
// the App and returns it with its log.
func startLogged(t *testing.T, args ...string) (*App, *syncBuffer) {
	t.Helper()
	cfg, err := Load(append([]string{"--listen", "127.0.0.1:0"}, args...), func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatalf("Load %q: %v", args, err)
	}
	log := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
	a, _, _ := startApp(t, *cfg)
	return a, log
}

// loggedAddr is the address of the line `msg="<what> listening"` of log.
func loggedAddr(t *testing.T, log *syncBuffer, what string) string {
	t.Helper()
	m := regexp.MustCompile(`msg="` + what + ` listening" addr=(\S+)`).FindStringSubmatch(log.String())
	if m == nil {
		t.Fatalf("no %q listening line in the log:\n%s", what, log)
	}
	return m[1]
}

// status is the HTTP status of GET http://addr/path.
func status(t *testing.T, addr, path string) int {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", addr, path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestPprofOffUnlessAsked: --admin serves /metrics, /healthz and /readyz,
// never /debug/pprof (DESIGN: only when asked for); --pprof ADDR serves
// it on a listener of its own, and the admin port still does not.
func TestPprofOffUnlessAsked(t *testing.T) {
	t.Parallel()
	paths := []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol", "/debug/pprof/heap"}

	_, log := startLogged(t, "--admin", "127.0.0.1:0")
	admin := loggedAddr(t, log, "admin")
	for _, path := range append([]string{"/metrics", "/healthz"}, paths...) {
		got, want := status(t, admin, path), http.StatusOK
		if path != "/metrics" && path != "/healthz" {
			want = http.StatusNotFound
		}
		if got != want {
			t.Errorf("by default, --admin %s: %d, want %d", path, got, want)
		}
	}

	_, log = startLogged(t, "--admin", "127.0.0.1:0", "--pprof", "127.0.0.1:0")
	admin, prof := loggedAddr(t, log, "admin"), loggedAddr(t, log, "pprof")
	for _, path := range paths {
		if got := status(t, prof, path); got != http.StatusOK {
			t.Errorf("--pprof %s: %d, want 200", path, got)
		}
		if got := status(t, admin, path); got != http.StatusNotFound {
			t.Errorf("with --pprof, --admin %s: %d, want 404", path, got)
		}
	}
	if got := status(t, admin, "/metrics"); got != http.StatusOK {
		t.Errorf("with --pprof, --admin /metrics: %d, want 200", got)
	}
}
