package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// Slots on a real cluster: keys of every shape land where Key puts them,
// a token frees nothing under another key, and a node that lost its
// scripts (NOSCRIPT) is reloaded, not failed.
func TestClusterSlots(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	s := newStore(t, c.Addrs())
	ctx := context.Background()
	p := &limit.Policy{Name: "jobs", Algorithm: limit.Concurrency, Limit: 2, Period: time.Minute}
	keys := []string{"acme", "{acme}:jobs", "tenant}1", "{v}", "v"}
	toks := map[string]string{}
	for _, k := range keys {
		tok := k + "-token"
		if r := s.Acquire(ctx, k, p, tok, 60_000); r.Err != nil || !r.Allowed || r.Remaining != 1 || r.DecidedBy != limit.ByStore {
			t.Fatalf("acquire %q: %+v", k, r)
		}
		toks[k] = tok
		typ, err := c.ClusterClient().Type(ctx, Key(k)).Result()
		if err != nil || typ != "zset" {
			t.Fatalf("%q: the Redis key %q is %q (%v), want the zset of its slots", k, Key(k), typ, err)
		}
	}
	for i, k := range keys {
		other := keys[(i+1)%len(keys)]
		if held, err := s.Release(ctx, other, p, toks[k]); err != nil || held {
			t.Fatalf("%q's token under %q: %v %v, want nothing freed", k, other, held, err)
		}
	}
	if err := c.ScriptFlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if held, err := s.Release(ctx, k, p, toks[k]); err != nil || !held {
			t.Fatalf("release %q after SCRIPT FLUSH: %v %v", k, held, err)
		}
		if n, _ := c.ClusterClient().Exists(ctx, Key(k)).Result(); n != 0 {
			t.Fatalf("%q: the set outlived its last slot", k)
		}
	}
	if err := c.ScriptFlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	if r := s.Acquire(ctx, "acme", p, "t", 60_000); r.Err != nil || !r.Allowed {
		t.Fatalf("acquire after SCRIPT FLUSH: %+v", r)
	}
	if ok, err := s.Reset(ctx, "acme", p); !ok || err != nil {
		t.Fatalf("reset: %v %v", ok, err)
	}
}
