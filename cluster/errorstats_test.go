package cluster

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// Deciding makes no error reply in Redis but the NOSCRIPT of a node's first
// call of each script: a user's alert on errorstats must not fire because
// sluice connected. (go-redis sent CLIENT MAINT_NOTIFICATIONS on every new
// connection, which Redis 7.0 refuses.)
func TestNoErrorRepliesOfOurOwn(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	single := redistest.NewSingle(t)
	ctx := context.Background()
	p := &limit.Policy{Limit: 100, Rate: 10, Period: time.Second}
	for _, tc := range []struct {
		name  string
		cfg   Config
		nodes []*localredis.Node
	}{
		{"cluster", Config{Addrs: c.Addrs(), Timeout: 5 * time.Second}, c.Nodes()},
		{"single", Config{URL: "redis://" + single.Addr, Timeout: 5 * time.Second}, []*localredis.Node{single}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, n := range tc.nodes {
				if err := n.Client().ConfigResetStat(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			s, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			keys := make([]string, 64)
			for i := range keys {
				keys[i] = "errs:" + strconv.Itoa(i)
			}
			for range 3 {
				for _, r := range takeN(ctx, s, p, keys...) {
					if r.Err != nil || !r.Allowed {
						t.Fatalf("%+v", r)
					}
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			for _, n := range tc.nodes {
				if got := errorReplies(ctx, t, n.Client()); len(got) != 0 {
					t.Errorf("%s answered error replies other than NOSCRIPT: %v", n.Addr, got)
				}
			}
		})
	}
}

// errorReplies returns the INFO errorstats lines of c but NOSCRIPT's.
func errorReplies(ctx context.Context, t *testing.T, c *redis.Client) []string {
	t.Helper()
	info, err := c.Info(ctx, "errorstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(info, "\r\n") {
		if strings.HasPrefix(line, "errorstat_") && !strings.HasPrefix(line, "errorstat_NOSCRIPT:") {
			out = append(out, line)
		}
	}
	return out
}
