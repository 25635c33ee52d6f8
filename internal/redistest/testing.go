package redistest

import (
	"os"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/internal/localredis"
)

// NewCluster starts a cluster for the test (see Start) and stops it in
// t.Cleanup. Progress goes to the test log unless cfg.Log is set; a failed
// test also logs the tail of every node's log. Without redis-server and
// redis-cli on PATH it skips the test, or fails it when the CI environment
// variable is set. The same holds for a cfg.Netns cluster where network
// namespaces cannot be made (not root, no ip). Under -short it skips the
// test (see SkipShort).
func NewCluster(tb testing.TB, cfg localredis.Config) *localredis.Cluster {
	tb.Helper()
	RequireRedis(tb, cfg.RedisServer, cfg.RedisCLI)
	if cfg.Netns {
		RequireNetns(tb)
	}
	if cfg.Log == nil {
		cfg.Log = tbWriter{tb}
	}
	c, err := localredis.Start(tb.Context(), cfg)
	if err != nil {
		tb.Fatalf("redistest: start cluster: %v", err)
	}
	stopAtCleanup(tb, "cluster", c.Nodes, c.Stop)
	return c
}

// stopAtCleanup stops what a helper started when the test ends, and logs
// the tail of each node's log when the test failed.
func stopAtCleanup(tb testing.TB, what string, nodes func() []*localredis.Node, stop func() error) {
	tb.Cleanup(func() {
		if tb.Failed() {
			for _, n := range nodes() {
				tb.Logf("%s (pid %d):\n%s", n.Addr, n.Pid, n.LogTail(20))
			}
		}
		if err := stop(); err != nil {
			tb.Errorf("redistest: stop %s: %v", what, err)
		}
	})
}

// NewSingle starts one plain redis-server for the test (see StartSingle)
// and stops it in t.Cleanup, with the same skip and CI rules as NewCluster.
func NewSingle(tb testing.TB) *localredis.Node {
	tb.Helper()
	RequireRedis(tb, "", "-")
	n, err := localredis.StartSingle(tb.Context(), localredis.Config{Log: tbWriter{tb}})
	if err != nil {
		tb.Fatalf("redistest: start redis-server: %v", err)
	}
	stopAtCleanup(tb, "redis-server", func() []*localredis.Node { return []*localredis.Node{n} }, n.Stop)
	return n
}

// NewSentinel starts a primary, its replicas and redis-sentinel processes
// for the test (see localredis.StartSentinel) and stops them in t.Cleanup,
// with the same skip and CI rules as NewCluster; it needs redis-sentinel.
func NewSentinel(tb testing.TB, cfg localredis.SentinelConfig) *localredis.Sentinel {
	tb.Helper()
	if short(tb, "redis-server and redis-sentinel") {
		return nil // reached only with a testing.TB whose Skip returns
	}
	if err := localredis.CheckSentinelBinaries(cfg.RedisServer, cfg.RedisSentinel); err != nil {
		missing(tb, err, "redis-server redis-sentinel")
		return nil // reached only with a testing.TB whose Skip returns
	}
	if cfg.Log == nil {
		cfg.Log = tbWriter{tb}
	}
	g, err := localredis.StartSentinel(tb.Context(), cfg)
	if err != nil {
		tb.Fatalf("redistest: start sentinel group: %v", err)
	}
	stopAtCleanup(tb, "sentinel group", func() []*localredis.Node { return append(g.Nodes(), g.Sentinels()...) }, g.Stop)
	return g
}

// RequireRedis skips the test, or fails it on CI, when a binary is missing.
// cli "-" means redis-cli is not needed. Under -short it skips the test
// (see SkipShort).
func RequireRedis(tb testing.TB, serverBin, cli string) {
	tb.Helper()
	if short(tb, "redis-server") {
		return
	}
	if err := localredis.CheckBinaries(serverBin, cli); err != nil {
		missing(tb, err, "redis-server")
	}
}

// RequireNetns skips the test, or fails it on CI, when a Config.Netns
// cluster cannot be started here (see localredis.CheckNetns). Under -short
// it skips the test (see SkipShort).
func RequireNetns(tb testing.TB) {
	tb.Helper()
	if short(tb, "root, ip and redis-server (network namespaces)") {
		return
	}
	if err := localredis.CheckNetns(); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatal("redistest: " + err.Error() + " (CI is set: this fails the build instead of skipping)")
			return
		}
		tb.Skip("redistest: " + err.Error())
	}
}

// SkipShort skips the test under -short, the unit tier (make unit), with a
// message that says what it needs: needs names it, as "redis-server" or
// "podman". Every test that needs a real store, root, podman or a sluice
// binary talking to Redis passes through it, most of them by NewCluster,
// NewSingle, NewSentinel, RequireRedis or RequireNetns. Under -short it
// skips whatever CI says: the rule that a missing binary fails on CI is the
// full run's (make test), which never sets -short.
func SkipShort(tb testing.TB, needs string) {
	tb.Helper()
	short(tb, needs)
}

// short is SkipShort, reporting whether it skipped, for a testing.TB whose
// Skip returns.
func short(tb testing.TB, needs string) bool {
	tb.Helper()
	if !testing.Short() {
		return false
	}
	tb.Skip("redistest: needs " + needs + ": run without -short")
	return true
}

// missing skips the test, or fails it on CI, for err from a binary check;
// packages are the Debian packages that bring the binaries.
func missing(tb testing.TB, err error, packages string) {
	tb.Helper()
	msg := "redistest: " + strings.TrimPrefix(err.Error(), localredis.ErrNoRedis.Error()+": ") +
		"; install Redis 7 (for example `apt-get install " + packages + "`) to run this test"
	if os.Getenv("CI") != "" {
		tb.Fatal(msg + " (CI is set: a missing binary fails the build instead of skipping)")
		return
	}
	tb.Skip(msg)
}

// tbWriter sends progress lines to the test log.
type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// NewTLSFiles is WriteTLSFiles into a folder of the test's, failing the test
// on error.
func NewTLSFiles(tb testing.TB) *localredis.TLSFiles {
	tb.Helper()
	f, err := localredis.WriteTLSFiles(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	return f
}
