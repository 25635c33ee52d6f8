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
		if r.skipped != tt.skip || r.failed != tt.failed {
			t.Errorf("CI=%q: skipped %v, failed %v; want %v, %v", tt.ci, r.skipped, r.failed, tt.skip, tt.failed)
		}
		if !strings.Contains(r.msg, "redis-server") || !strings.Contains(r.msg, "install Redis") {
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
		if r.skipped != tt.skip || r.failed != tt.failed {
			t.Errorf("CI=%q: skipped %v, failed %v; want %v, %v", tt.ci, r.skipped, r.failed, tt.skip, tt.failed)
		}
		if !strings.Contains(r.msg, "redis-sentinel") || !strings.Contains(r.msg, "apt-get install redis-server redis-sentinel") {
			t.Errorf("CI=%q: message %q does not say what is missing and how to get it", tt.ci, r.msg)
		}
	}
}
