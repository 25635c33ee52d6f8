package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// waitLimit polls RL.PEEK through c until key's limit is want, and returns
// how long that took; it fails the test after within.
func waitLimit(ctx context.Context, t *testing.T, c *redis.Client, key string, want int64, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		r, err := takeOp(ctx, c, "RL.PEEK", key, 1)
		if err == nil && r.Limit == want {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%s: limit %d (err %v) after %v, want %d", key, r.Limit, err, within, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// RL.POLICY on two sluice instances in front of one cluster: a change made
// through one is in force on the other within a second, by Pub/Sub, and a
// change written behind sluice's back (no announcement) heals by the
// periodic check.
func TestRuntimePoliciesTwoInstances(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	cfg := writeConfig(t, "defaults: {on_store_error: closed}\npolicies:\n  - name: api\n    match: \"*\"\n    limit: 100\n    rate: 50\n")
	args := []string{"--config", cfg, "--cluster", strings.Join(c.Addrs(), ",")}
	a, b := startSluice(t, args...), startSluice(t, args...)
	ca, cb := a.client(t), b.client(t)
	ctx := context.Background()

	if err := ca.Do(ctx, "RL.POLICY", "SET", "acme", `{"match": "acme:*", "algorithm": "sliding_window", "limit": 7, "period": "1m", "on_store_error": "open"}`).Err(); err != nil {
		t.Fatal(err)
	}
	if r, err := takeOp(ctx, ca, "RL.PEEK", "acme:1", 1); err != nil || r.Limit != 7 {
		t.Fatalf("the instance that set it: %+v %v", r, err)
	}
	took := waitLimit(ctx, t, cb, "acme:1", 7, time.Second)
	t.Logf("SET through A in force on B after %v", took)

	// The limit is shared: 7 through both, not 7 each.
	admitted := 0
	for i := range 10 {
		cl := ca
		if i%2 == 1 {
			cl = cb
		}
		if r, err := take(ctx, cl, "acme:1", 1); err == nil && r.Allowed {
			admitted++
		}
	}
	if admitted != 7 {
		t.Fatalf("admitted %d through two instances, want 7", admitted)
	}

	list, err := cb.Do(ctx, "RL.POLICY", "LIST").Slice()
	if err != nil || len(list) != 2 {
		t.Fatalf("LIST on B: %v %v", list, err)
	}
	if first := list[0].([]any); first[1] != "acme" || first[3] != "runtime" {
		t.Fatalf("LIST on B: %v", list)
	}
	js, err := cb.Do(ctx, "RL.POLICY", "GET", "acme").Text()
	if err != nil || !strings.Contains(js, `"limit":7`) {
		t.Fatalf("GET on B: %s %v", js, err)
	}
	if err := cb.Do(ctx, "RL.POLICY", "GET", "nope").Err(); err != redis.Nil {
		t.Fatalf("GET of a missing policy: %v, want nil", err)
	}

	// the file's validation, one line naming the policy and field
	err = ca.Do(ctx, "RL.POLICY", "SET", "bad", `{"match": "b:*", "limit": 0, "rate": 1, "on_store_error": "open"}`).Err()
	if err == nil || err.Error() != `ERR policy "bad": limit: must be a positive integer, got 0` {
		t.Fatalf("invalid SET: %v", err)
	}
	if err := ca.Do(ctx, "RL.POLICY", "SET", "x").Err(); err == nil || !strings.Contains(err.Error(), "wrong number of arguments") {
		t.Fatalf("SET without JSON: %v", err)
	}

	// Behind sluice's back: no PUBLISH, so only the periodic check sees it.
	cc := c.ClusterClient() // closed by the cluster's Stop
	if err := cc.HSet(ctx, cluster.PoliciesKey, "quiet", `{"match": "quiet:*", "limit": 3, "rate": 1, "period": "1h", "on_store_error": "closed"}`).Err(); err != nil {
		t.Fatal(err)
	}
	took = waitLimit(ctx, t, ca, "quiet:1", 3, time.Second)
	t.Logf("an unannounced change healed on A after %v", took)
	waitLimit(ctx, t, cb, "quiet:1", 3, time.Second)

	n, err := cb.Do(ctx, "RL.POLICY", "DEL", "acme").Int()
	if err != nil || n != 1 {
		t.Fatalf("DEL: %d %v", n, err)
	}
	waitLimit(ctx, t, ca, "acme:1", 100, time.Second)
	if n, _ := cb.Do(ctx, "RL.POLICY", "DEL", "acme").Int(); n != 0 {
		t.Fatalf("second DEL: %d, want 0", n)
	}
}

// The embedded store keeps runtime policies in the process.
func TestRuntimePoliciesEmbedded(t *testing.T) {
	t.Parallel()
	p := startSluice(t)
	cl := p.client(t)
	ctx := context.Background()
	if err := cl.Do(ctx, "RL.POLICY", "SET", "tiny", `{"match": "tiny:*", "algorithm": "gcra", "limit": 2, "rate": 1, "period": "1h", "on_store_error": "open"}`).Err(); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false} {
		if r, err := take(ctx, cl, "tiny:a", 1); err != nil || r.Allowed != want || r.DecidedBy != "embedded" {
			t.Fatalf("take %d: %+v %v", i, r, err)
		}
	}
}

// With --admin-pass, RL.POLICY SET and DEL need AUTH admin; LIST and GET
// do not.
func TestRuntimePoliciesNeedAdmin(t *testing.T) {
	t.Parallel()
	p := startSluice(t, "--admin-pass", "s3cret-adm")
	cl := p.client(t)
	ctx := context.Background()
	js := `{"match": "t:*", "limit": 2, "rate": 1, "period": "1h", "on_store_error": "open"}`
	want := "NOPERM User default has no permissions to run the 'rl.policy|set' command"
	if err := cl.Do(ctx, "RL.POLICY", "SET", "t", js).Err(); err == nil || err.Error() != want {
		t.Fatalf("SET without admin: %v", err)
	}
	want = "NOPERM User default has no permissions to run the 'rl.policy|del' command"
	if err := cl.Do(ctx, "RL.POLICY", "DEL", "t").Err(); err == nil || err.Error() != want {
		t.Fatalf("DEL without admin: %v", err)
	}
	if err := cl.Do(ctx, "RL.POLICY", "LIST").Err(); err != nil {
		t.Fatalf("LIST: %v", err)
	}
	admin := redis.NewClient(&redis.Options{Addr: p.Addr, Username: "admin", Password: "s3cret-adm", MaxRetries: -1})
	defer admin.Close()
	if err := admin.Do(ctx, "RL.POLICY", "SET", "t", js).Err(); err != nil {
		t.Fatalf("SET as admin: %v", err)
	}
	if r, err := take(ctx, cl, "t:1", 1); err != nil || r.Limit != 2 {
		t.Fatalf("the policy set by admin: %+v %v", r, err)
	}
}
