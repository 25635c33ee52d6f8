package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitCount waits until s appears at least n times in the process's log.
func (p *proc) waitCount(s string, n int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if strings.Count(p.Logs(), s) >= n {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func writeEnvoyFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// --envoy-config loads the directory at start and prints its rules; SIGHUP
// reloads it (a changed file, a new file); a bad reload keeps the last
// good rules and says why, naming file and path. RESP keeps serving.
func TestEnvoyConfigReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeEnvoyFile(t, dir, "edge.yaml", `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
`)
	s := startSluice(t, "--envoy-config", dir, "--watch-config=false") // SIGHUP alone: the watch would log its own reloads
	logs := s.Logs()
	for _, want := range []string{
		`msg="envoy rule" dir=` + dir + ` rule="edge:remote_address 10 per second algorithm=fixed_window on_store_error=open (` + filepath.Join(dir, "edge.yaml") + ` descriptors[0])"`,
		`rule="edge:remote_address=50.0.0.5 0 per second`,
		`msg="envoy config loaded" dir=` + dir + ` domains=1 rules=2`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("start log lacks %q:\n%s", want, logs)
		}
	}

	writeEnvoyFile(t, dir, "edge.yaml", `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 600, algorithm: token_bucket, on_store_error: closed}
`)
	writeEnvoyFile(t, dir, "internal.yml", "domain: internal\ndescriptors:\n  - key: ldap\n    rate_limit: {unlimited: true}\n")
	s.Signal(syscall.SIGHUP)
	if !s.waitLog(`msg="envoy config reloaded" dir=`+dir+` domains=2 rules=2`, 10*time.Second) {
		t.Fatalf("no reload logged:\n%s", s.Logs())
	}
	for _, want := range []string{
		`rule="edge:remote_address 600 per minute algorithm=token_bucket on_store_error=closed hot=lease(threshold=500/s) (`, // a bucket rule's default
		`rule="internal:ldap unlimited (`,
	} {
		if !strings.Contains(s.Logs(), want) {
			t.Errorf("reload log lacks %q:\n%s", want, s.Logs())
		}
	}

	writeEnvoyFile(t, dir, "edge.yaml", "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unitt: second}\n")
	s.Signal(syscall.SIGHUP)
	if !s.waitLog("envoy config reload failed; keeping the last good rules", 10*time.Second) {
		t.Fatalf("bad reload not logged:\n%s", s.Logs())
	}
	if want := filepath.Join(dir, "edge.yaml") + `:4: descriptors[0].rate_limit.unitt: unknown field`; !strings.Contains(s.Logs(), want) {
		t.Errorf("the reload error does not name file and path %q:\n%s", want, s.Logs())
	}
	if n := strings.Count(s.Logs(), `msg="envoy config reloaded"`); n != 1 {
		t.Errorf("%d good reloads logged, want 1", n)
	}
	// The last good rules stay: fixing the file and reloading again gives
	// them back, and RESP answered all along.
	writeEnvoyFile(t, dir, "edge.yaml", "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: hour, requests_per_unit: 7}\n")
	s.Signal(syscall.SIGHUP)
	if !s.waitCount(`msg="envoy config reloaded"`, 2, 10*time.Second) {
		t.Fatalf("no second reload logged:\n%s", s.Logs())
	}
	if !strings.Contains(s.Logs(), `rule="edge:remote_address 7 per hour`) {
		t.Errorf("fixed rule not logged:\n%s", s.Logs())
	}
	if _, err := take(context.Background(), s.client(t), "k", 1); err != nil {
		t.Errorf("RL.TAKE after the reloads: %v", err)
	}
}

// A bad --envoy-config directory fails the start, listing every problem.
func TestEnvoyConfigBadStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeEnvoyFile(t, dir, "a.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	writeEnvoyFile(t, dir, "b.yaml", "domain: d\n")
	out, err := exec.Command(binary, "serve", "--listen", "127.0.0.1:0", "--admin", "", "--envoy-config", dir).CombinedOutput()
	if err == nil {
		t.Fatalf("serve started with a bad --envoy-config:\n%s", out)
	}
	for _, want := range []string{
		filepath.Join(dir, "a.yaml") + `:4: descriptors[0].rate_limit.unit: unknown unit "fortnight"`,
		filepath.Join(dir, "b.yaml") + `:1: domain: duplicate domain "d"`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = exec.Command(binary, "serve", "--listen", "127.0.0.1:0", "--admin", "", "--envoy-config", filepath.Join(dir, "missing")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no such file or directory") {
		t.Errorf("missing dir: %v\n%s", err, out)
	}
}
