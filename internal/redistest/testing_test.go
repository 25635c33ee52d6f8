package redistest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/internal/localredis"
)

// recordTB records Skip and Fatal instead of ending the test.
type recordTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recordTB) Helper()           {}
func (r *recordTB) Skip(args ...any)  { r.skipped, r.msg = true, fmt.Sprint(args...) }
func (r *recordTB) Fatal(args ...any) { r.failed, r.msg = true, fmt.Sprint(args...) }

func TestRequireRedisMissing(t *testing.T) {
	for _, tt := range []struct {
		ci           string
		skip, failed bool
	}{
		{ci: "", skip: true},
		{ci: "true", failed: true},
	} {
		t.Setenv("CI", tt.ci)
		r := &recordTB{TB: t}
		RequireRedis(r, "/nonexistent/redis-server", "")
		if testing.Short() {
			tt.skip, tt.failed = true, false // SkipShort's rule comes first
		}
		if r.skipped != tt.skip || r.failed != tt.failed {
			t.Errorf("CI=%q: skipped %v, failed %v; want %v, %v", tt.ci, r.skipped, r.failed, tt.skip, tt.failed)
		}
		if !testing.Short() && (!strings.Contains(r.msg, "redis-server") || !strings.Contains(r.msg, "install Redis")) {
			t.Errorf("CI=%q: message %q does not say what is missing and how to get it", tt.ci, r.msg)
		}
	}
}

func TestNewSentinelMissing(t *testing.T) {
	for _, tt := range []struct {
		ci           string
		skip, failed bool
	}{
		{ci: "", skip: true},
		{ci: "true", failed: true},
	} {
		t.Setenv("CI", tt.ci)
		r := &recordTB{TB: t}
		if g := NewSentinel(r, localredis.SentinelConfig{RedisSentinel: "/nonexistent/redis-sentinel"}); g != nil {
			t.Fatalf("CI=%q: NewSentinel without redis-sentinel started %s", tt.ci, g.Flag())
		}
		if testing.Short() {
			tt.skip, tt.failed = true, false
		}
		if r.skipped != tt.skip || r.failed != tt.failed {
			t.Errorf("CI=%q: skipped %v, failed %v; want %v, %v", tt.ci, r.skipped, r.failed, tt.skip, tt.failed)
		}
		if !testing.Short() && (!strings.Contains(r.msg, "redis-sentinel") || !strings.Contains(r.msg, "apt-get install redis-server redis-sentinel")) {
			t.Errorf("CI=%q: message %q does not say what is missing and how to get it", tt.ci, r.msg)
		}
	}
}

// TestSkipShort: under -short a test that needs Redis skips, CI or not, and
// says what it needs and how to run it; without -short SkipShort does nothing.
func TestSkipShort(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		r := &recordTB{TB: t}
		SkipShort(r, "podman")
		if got, want := r.skipped, testing.Short(); got != want || r.failed {
			t.Errorf("CI=%q, -short %v: skipped %v, failed %v", ci, want, got, r.failed)
		}
		if want := "needs podman: run without -short"; r.skipped && !strings.Contains(r.msg, want) {
			t.Errorf("CI=%q: message %q does not say %q", ci, r.msg, want)
		}
	}
}
