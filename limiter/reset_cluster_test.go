package limiter

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/hotkey"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// keysOf returns the Redis keys, on every primary, whose name holds user.
func keysOf(ctx context.Context, t *testing.T, cc *redis.ClusterClient, user string) []string {
	t.Helper()
	var keys []string
	var mu sync.Mutex
	err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		ks, err := n.Keys(ctx, "*").Result()
		mu.Lock()
		defer mu.Unlock()
		for _, k := range ks {
			if strings.Contains(k, user) {
				keys = append(keys, k)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// RL.RESET of a hot key on a real Redis Cluster: a split key's sub-buckets
// are deleted from Redis with the key, a lease key's bucket too, and the
// next take is admitted.
func TestResetHotKeyOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	store, err := cluster.New(cluster.Config{Addrs: c.Addrs(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	hot, err := hotkey.New(hotkey.Config{Store: store, LeaseTTL: time.Hour, Timeout: func() time.Duration { return 5 * time.Second }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hot.Close(context.Background()) })
	split := &limit.Policy{Name: "split", Limit: 16, Rate: 4, Period: time.Hour, OnStoreError: limit.FailClosed,
		Hot: limit.Hot{Mode: limit.HotSplit, Threshold: 5, Split: 4}}
	lease := &limit.Policy{Name: "lease", Limit: 10, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed,
		Hot: limit.Hot{Mode: limit.HotLease, Threshold: 5}}
	l, err := New(Config{Store: store, Hot: hot, Timeout: func() time.Duration { return 5 * time.Second },
		Policies: MatcherFunc(func(key string) *limit.Policy {
			if strings.HasPrefix(key, "split:") {
				return split
			}
			return lease
		})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cc := c.ClusterClient()
	for _, tc := range []struct{ key, by string }{{"split:viral", limit.BySplit}, {"lease:viral", limit.ByLease}} {
		t.Run(tc.by, func(t *testing.T) {
			drain(t, l, tc.key, tc.by)
			before := keysOf(ctx, t, cc, tc.key)
			if tc.by == limit.BySplit && len(before) != 5 {
				t.Fatalf("Redis holds %v for the drained key, want its bucket and 4 sub-buckets", before)
			}
			existed, err := l.Reset(ctx, tc.key)
			if err != nil || !existed {
				t.Fatalf("RL.RESET: %v %v, want true", existed, err)
			}
			// The key's own bucket is gone; a split key's sub-buckets are
			// left empty (the reset's one fresh budget is the main
			// bucket's), so only they may remain.
			after := keysOf(ctx, t, cc, tc.key)
			for _, k := range after {
				if !strings.HasPrefix(k, cluster.SplitPrefix) {
					t.Fatalf("after RL.RESET Redis still holds %v (before: %v)", after, before)
				}
			}
			if tc.by == limit.BySplit && len(after) != 4 {
				t.Fatalf("after RL.RESET Redis holds %v, want the 4 sub-buckets, empty", after)
			}
			if r := take(t, l, tc.key)[0]; r.Err != nil || !r.Allowed {
				t.Fatalf("the first take after RL.RESET: %+v, want admitted", r)
			}
		})
	}
}
