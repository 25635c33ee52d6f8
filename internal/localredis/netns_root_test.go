//go:build unix

package localredis_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-rl/sluice/internal/localredis"
)

// TestNetnsNeedsRoot: without root, CheckNetns and a Netns Start fail with
// ErrNetns, saying so, and redistest skips the test. As root it runs
// itself again as the user nobody.
func TestNetnsNeedsRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		runAsNobody(t, "TestNetnsNeedsRoot")
		return
	}
	err := localredis.CheckNetns()
	if !errors.Is(err, localredis.ErrNetns) || !strings.Contains(err.Error(), "localredis: network namespaces need root") {
		t.Errorf("CheckNetns() as uid %d = %v, want ErrNetns", os.Geteuid(), err)
	}
	if _, err := localredis.Start(t.Context(), localredis.Config{Netns: true}); !errors.Is(err, localredis.ErrNetns) {
		t.Errorf("Start with Netns as uid %d = %v, want ErrNetns", os.Geteuid(), err)
	}
	t.Logf("as uid %d: %v", os.Geteuid(), err)
}

// runAsNobody runs test alone in a copy of this test binary as uid and gid
// 65534, without CI set, and fails t if it fails.
func runAsNobody(t *testing.T, test string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "localredis-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "localredis.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), bin, "-test.run", "^"+test+"$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("%s as nobody: %v\n%s", test, err, out)
	}
	t.Logf("as nobody:\n%s", out)
}
