package main

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// Periods long enough that nothing refills, and no window ends, while the
// test runs: every figure below is exact.
// adjustConfig's timeout is long: these tests count tokens exactly, and a
// store answer later than 50ms on a loaded CI machine is an overload answer
// that the count cannot tell from a lost one ("gc:tenant42 adjust +500:
// … DecidedBy:overload-closed" under -race beside the podman compose test).
const adjustConfig = `timeout: 1s
defaults:
  on_store_error: closed
  limit: 1000
policies:
  - {name: tb, match: "tb:*", algorithm: token_bucket, rate: 1000, period: 24h}
  - {name: gc, match: "gc:*", algorithm: gcra, rate: 1000, period: 24h}
  - {name: sw, match: "sw:*", algorithm: sliding_window, period: 8760h}
  - {name: fw, match: "fw:*", algorithm: fixed_window, period: 8760h}
  - {name: rest, match: "*", rate: 1000, period: 24h}
`

// adjustOf sends RL.ADJUST key delta and parses its six fields.
func adjustOf(t *testing.T, c *redis.Client, key string, delta int64) reply {
	t.Helper()
	r, err := takeOp(t.Context(), c, "RL.ADJUST", key, delta)
	if err != nil {
		t.Fatalf("RL.ADJUST %s %d: %v", key, delta, err)
	}
	return r
}

// TestAdjustLLMPatternOnCluster is the LLM pattern through go-redis on two
// sluice processes in front of one real Redis Cluster, for every
// algorithm: take an estimate at the request with a receipt, adjust by
// the difference at the response. A response that used more leaves the
// key in debt (a bucket) or spent (a window): takes are refused on both
// instances; one that used less gives back by its take's receipt, on
// either instance, and takes are admitted again, never more than the
// limit. The state's TTL in Redis covers the debt.
func TestAdjustLLMPatternOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	args := []string{"--config", writeConfig(t, adjustConfig), "--cluster", strings.Join(c.Addrs(), ",")}
	a, b := startSluice(t, args...).client(t), startSluice(t, args...).client(t)
	bucketLeft := map[bool]int64{true: 200, false: 700} // after the give-back: a bucket paid its debt of 500 first, a window (spent at 1000, its most) counts 300
	for _, prefix := range []string{"tb", "gc", "sw", "fw"} {
		key := prefix + ":tenant42"
		bucket := prefix == "tb" || prefix == "gc"
		first, r1 := takeReceipt(t, a, key, 300)
		second, r2 := takeReceipt(t, a, key, 700)
		if !first.Allowed || first.Remaining != 700 || !second.Allowed || second.Remaining != 0 || r1 == "" || r2 == "" {
			t.Fatalf("%s estimates: %+v %q, %+v %q", key, first, r1, second, r2)
		}
		// The first response used 800: 500 more than its estimate.
		up := adjustOf(t, a, key, 500)
		if !up.Allowed || up.Limit != 1000 || up.Remaining != 0 || up.Retry != -1 || up.ResetMs <= 0 || up.DecidedBy != "store" {
			t.Fatalf("%s adjust +500: %+v", key, up)
		}
		if bucket {
			// 500 in debt: 1500 tokens of refill, 1.5 days at 1000 a day
			// (less the moments since), more than a full bucket's day
			if full, most := int64(24*time.Hour/time.Millisecond), int64(36*time.Hour/time.Millisecond); up.ResetMs <= full || up.ResetMs > most {
				t.Fatalf("%s adjust +500: reset %d ms, want the debt's repayment, in (%d, %d]", key, up.ResetMs, full, most)
			}
			ttl, err := c.ClusterClient().PTTL(t.Context(), cluster.Key(key)).Result()
			if err != nil || ttl <= 24*time.Hour || ttl > 36*time.Hour+time.Second {
				t.Fatalf("%s: PTTL %v (%v), want the debt's repayment plus a second", key, ttl, err)
			}
		}
		for _, cl := range []*redis.Client{a, b} {
			if r := mustTake(t, cl, key, 1); r.Allowed || r.Retry <= 0 || r.Remaining != 0 {
				t.Fatalf("%s take in debt: %+v, want refused", key, r)
			}
		}
		// The second response used nothing of its 700.
		down, err := giveBack(t, a, key, -700, r2)
		if want := bucketLeft[bucket]; err != nil || !down.Allowed || down.Remaining != want || down.DecidedBy != "store" {
			t.Fatalf("%s adjust -700: %+v %v, want %d left", key, down, err, want)
		}
		left := bucketLeft[bucket]
		if r := mustTake(t, a, key, left); !r.Allowed || r.Remaining != 0 || r.DecidedBy != "store" {
			t.Fatalf("%s take %d after the give-back: %+v, want admitted by the store (the deny cache cleared)", key, left, r)
		}
		if r := mustTake(t, a, key, 1); r.Allowed {
			t.Fatalf("%s take past the limit: %+v", key, r)
		}
		// The other instance gives back by the first take's receipt, once.
		if r, err := giveBack(t, b, key, -300, r1); err != nil || r.Remaining != 300 {
			t.Fatalf("%s adjust -300 on b: %+v %v, want 300 left", key, r, err)
		}
		if _, err := giveBack(t, a, key, -300, r1); err == nil {
			t.Fatalf("%s: a receipt used on b gave back again on a", key)
		}
	}
	if n := infoOf(t, a, "adjusts"); n != 8 {
		t.Errorf("INFO adjusts on a: %d, want 8", n)
	}
	if n := infoOf(t, a, "adjust_tokens_spent"); n != 4*500 {
		t.Errorf("INFO adjust_tokens_spent on a: %d, want 2000", n)
	}
	if n := infoOf(t, b, "adjust_tokens_returned"); n != 4*300 {
		t.Errorf("INFO adjust_tokens_returned on b: %d, want 1200", n)
	}
	if err := a.Do(t.Context(), "RL.ADJUST", "tb:x", "1.5").Err(); err == nil || err.Error() != "ERR delta must be an integer between -9007199254740991 and 9007199254740991" {
		t.Errorf("RL.ADJUST with a bad delta: %v", err)
	}
	if err := a.Do(t.Context(), "RL.ADJUST", "tb:x").Err(); err == nil || err.Error() != "ERR wrong number of arguments for 'rl.adjust' command" {
		t.Errorf("RL.ADJUST without a delta: %v", err)
	}
}

// The RL.ADJUST session of docs/commands.md (the LLM pattern), replayed as
// the README's session is.
func TestAdjustDocSession(t *testing.T) {
	t.Parallel()
	replaySession(t, "docs/commands.md", "adjust-test: config", "adjust-test: session")
}
