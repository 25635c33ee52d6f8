package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// mtake sends RL.MTAKE and parses [allowed, [six fields per key]].
func mtake(ctx context.Context, c *redis.Client, pairs ...any) (bool, []reply, error) {
	v, err := c.Do(ctx, append([]any{"RL.MTAKE"}, pairs...)...).Slice()
	if err != nil {
		return false, nil, err
	}
	if len(v) != 2 {
		return false, nil, fmt.Errorf("reply has %d elements, want 2: %v", len(v), v)
	}
	ok, isInt := v[0].(int64)
	rules, isArr := v[1].([]any)
	if !isInt || !isArr || len(rules) != len(pairs)/2 {
		return false, nil, fmt.Errorf("reply %v, want [integer, array of %d]", v, len(pairs)/2)
	}
	out := make([]reply, len(rules))
	for i, r := range rules {
		f, _ := r.([]any)
		if len(f) != 6 {
			return false, nil, fmt.Errorf("rule %d: %v, want six fields", i, r)
		}
		n := make([]int64, 5)
		for j := range n {
			n[j], _ = f[j].(int64)
		}
		by, _ := f[5].(string)
		out[i] = reply{Allowed: n[0] == 1, Limit: n[1], Remaining: n[2], Retry: n[3], ResetMs: n[4], DecidedBy: by}
	}
	return ok == 1, out, nil
}

func peek(ctx context.Context, t *testing.T, c *redis.Client, key string) reply {
	t.Helper()
	r, err := takeOp(ctx, c, "RL.PEEK", key, 1)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func takeOp(ctx context.Context, c *redis.Client, cmd, key string, cost int64) (reply, error) {
	if cmd == "RL.TAKE" {
		return take(ctx, c, key, cost)
	}
	v, err := c.Do(ctx, cmd, key, cost).Slice()
	if err != nil {
		return reply{}, err
	}
	if len(v) != 6 {
		return reply{}, fmt.Errorf("%s reply %v", cmd, v)
	}
	n := make([]int64, 5)
	for i := range n {
		n[i], _ = v[i].(int64)
	}
	by, _ := v[5].(string)
	return reply{Allowed: n[0] == 1, Limit: n[1], Remaining: n[2], Retry: n[3], ResetMs: n[4], DecidedBy: by}, nil
}

// multiConfig starts with, for each algorithm, an enforced rule of 4 an
// hour and a shadow rule of 1 an hour on keys of one hash tag:
// {t}:win:<algorithm> and {t}:dark:<algorithm>[...].
var multiConfig = `defaults:
  on_store_error: closed
policies:
` + tagPolicies() + `  - name: per-ip
    match: "ip:*"
    limit: 50
    rate: 50
    period: 1h
  - name: per-account
    match: "account:*"
    limit: 5
    rate: 5
    period: 1h
  - name: tagged
    match: "{*"
    limit: 3
    rate: 1
    period: 1h
  - name: windows
    match: "win:*"
    algorithm: sliding_window
    limit: 4
    period: 1h
  - name: shadowed
    match: "dark:*"
    limit: 1
    rate: 1
    period: 1h
    shadow: true
`

func tagPolicies() string {
	var b strings.Builder
	for _, alg := range limit.Algorithms {
		fmt.Fprintf(&b, "  - {name: win-%s, match: \"{t}:win:%s\", algorithm: %s, limit: 4, rate: 4, period: 1h}\n", alg, alg, alg)
		fmt.Fprintf(&b, "  - {name: dark-%s, match: \"{t}:dark:%s*\", algorithm: %s, limit: 1, rate: 1, period: 1h, shadow: true}\n", alg, alg, alg)
	}
	return b.String()
}

// The config for RL.MTAKE with a shadow rule.
const shadowConfig = `defaults: {on_store_error: closed}
policies:
  - {name: win,  match: "win:*",  limit: 4, rate: 4, period: 1h}
  - {name: dark, match: "dark:*", limit: 1, rate: 1, period: 1h, shadow: true}
`

// shadowApart checks that a shadow rule neither blocks nor unblocks an
// RL.MTAKE: eight calls of win 1 dark 1 admit exactly win's 4 and spend
// them, the shadow rule's reply is its own bucket as RL.TAKE would report
// it (allowed, decided_by shadow), and a shadow rule of a refused call
// still takes, decided as if alone.
func shadowApart(ctx context.Context, t *testing.T, cl *redis.Client, win, dark, fresh string) {
	t.Helper()
	admitted := 0
	for i := range 8 {
		ok, rules, err := mtake(ctx, cl, win, 1, dark, 1)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			admitted++
		}
		if d := rules[1]; !d.Allowed || d.DecidedBy != "shadow" || d.Limit != 1 || d.Remaining != 0 || d.Retry != -1 {
			t.Fatalf("call %d: the shadow rule's reply %+v, want allowed, limit 1, remaining 0, retry -1, shadow", i+1, d)
		}
	}
	if r := peek(ctx, t, cl, win); admitted != 4 || r.Remaining != 0 {
		t.Fatalf("8 calls of RL.MTAKE %s 1 %s 1 admitted %d, and RL.PEEK %s says %d remaining; want 4 and 0", win, dark, admitted, win, r.Remaining)
	}
	ok, rules, err := mtake(ctx, cl, win, 1, fresh, 1)
	if err != nil || ok || rules[0].Allowed || !rules[1].Allowed || rules[1].Remaining != 0 {
		t.Fatalf("a call refused by %s: %v %+v %v", win, ok, rules, err)
	}
	if r := peek(ctx, t, cl, fresh); r.Remaining != 0 {
		t.Fatalf("the shadow rule %s of a refused call holds %d, want 0 (decided as alone)", fresh, r.Remaining)
	}
}

// The example in embedded mode, through the binary.
func TestMTakeShadowEmbedded(t *testing.T) {
	t.Parallel()
	p := startSluice(t, "--config", writeConfig(t, shadowConfig))
	shadowApart(context.Background(), t, p.client(t), "win:x", "dark:x", "dark:y")
}

// RL.MTAKE through the sluice binary on a real cluster: the note's login
// example with its keys on different slots (take, reject, refund), the
// same with keys of one slot (one script), mixed algorithms, shadow rules,
// and the race: concurrent MTAKEs never admit past any rule.
func TestMTakeOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	p := startSluice(t, "--config", writeConfig(t, multiConfig), "--cluster", strings.Join(c.Addrs(), ","))
	cl := p.client(t)
	ctx := context.Background()

	t.Run("login: per-IP 50, per-account 5 exhausted, on different slots", func(t *testing.T) {
		ip, acct := "ip:203.0.113.7", "account:bob"
		if cluster.Slot(cluster.Key(ip)) == cluster.Slot(cluster.Key(acct)) {
			t.Fatal("the example needs keys on different slots")
		}
		for range 5 {
			if r, err := take(ctx, cl, acct, 1); err != nil || !r.Allowed {
				t.Fatalf("draining the account: %+v %v", r, err)
			}
		}
		for i := range 10 {
			ok, rules, err := mtake(ctx, cl, ip, 1, acct, 1)
			if err != nil {
				t.Fatal(err)
			}
			if ok || !rules[0].Allowed || rules[1].Allowed || rules[1].Retry < 1 {
				t.Fatalf("attempt %d: allowed=%v rules=%+v, want refused by the account rule only", i, ok, rules)
			}
			if rules[0].Remaining != 50 {
				t.Fatalf("attempt %d: the IP rule reports %d left after its refund, want 50", i, rules[0].Remaining)
			}
		}
		if r := peek(ctx, t, cl, ip); r.Remaining != 50 {
			t.Fatalf("after 10 refused attempts the IP bucket holds %d, want 50 (not 40)", r.Remaining)
		}
		info, err := cl.Info(ctx, "sluice").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"mtakes:10\r\n", "mtake_refunds:10\r\n", "mtake_refund_errors:0\r\n"} {
			if !strings.Contains(info, want) {
				t.Errorf("INFO sluice lacks %q:\n%s", want, info)
			}
		}
	})

	t.Run("one slot: one script, nothing spent on a reject", func(t *testing.T) {
		a, b := "{u1}:ip", "{u1}:acct"
		if cluster.Slot(cluster.Key(a)) != cluster.Slot(cluster.Key(b)) {
			t.Fatal("hash-tagged keys must share a slot")
		}
		ok, rules, err := mtake(ctx, cl, a, 1, b, 3)
		if err != nil || !ok || rules[0].Remaining != 2 || rules[1].Remaining != 0 {
			t.Fatalf("first: %v %+v %v", ok, rules, err)
		}
		ok, rules, err = mtake(ctx, cl, a, 1, b, 1)
		if err != nil || ok || !rules[0].Allowed || rules[1].Allowed {
			t.Fatalf("second: %v %+v %v", ok, rules, err)
		}
		if r := peek(ctx, t, cl, a); r.Remaining != 2 {
			t.Fatalf("%s holds %d after a refused MTAKE, want 2", a, r.Remaining)
		}
	})

	t.Run("mixed algorithms and a shadow rule", func(t *testing.T) {
		if _, err := take(ctx, cl, "dark:x", 1); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			ok, rules, err := mtake(ctx, cl, "win:x", 1, "dark:x", 1)
			if err != nil || !ok {
				t.Fatalf("take %d: %v %+v %v", i, ok, rules, err)
			}
			if rules[1].DecidedBy != "shadow" {
				t.Fatalf("the shadow rule decided_by %q", rules[1].DecidedBy)
			}
		}
		ok, rules, err := mtake(ctx, cl, "win:x", 1, "dark:x", 1)
		if err != nil || ok || rules[0].Allowed {
			t.Fatalf("fifth: %v %+v %v: the window of 4 must refuse", ok, rules, err)
		}
	})

	t.Run("a shadow rule on the same hash tag, every algorithm", func(t *testing.T) {
		for _, alg := range limit.Algorithms {
			win, dark := "{t}:win:"+string(alg), "{t}:dark:"+string(alg)
			if cluster.Slot(cluster.Key(win)) != cluster.Slot(cluster.Key(dark)) {
				t.Fatal("hash-tagged keys must share a slot")
			}
			t.Run(string(alg), func(t *testing.T) {
				shadowApart(ctx, t, cl, win, dark, dark+":y")
			})
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			args []any
			want string
		}{
			{[]any{"RL.MTAKE", "ip:1"}, "ERR wrong number of arguments for 'rl.mtake' command"},
			{[]any{"RL.MTAKE", "ip:1", 1, "ip:2"}, "ERR wrong number of arguments for 'rl.mtake' command"},
			{[]any{"RL.MTAKE", "ip:1", 0}, "ERR cost must be a positive integer"},
			{[]any{"RL.MTAKE", "ip:1", 1, "nomatch", 1}, "ERR no policy matches key 'nomatch'"},
		} {
			err := cl.Do(ctx, tc.args...).Err()
			if err == nil || err.Error() != tc.want {
				t.Errorf("%v: %v, want %s", tc.args, err, tc.want)
			}
		}
		if r := peek(ctx, t, cl, "ip:1"); r.Remaining != 50 {
			t.Fatalf("a failed MTAKE spent: ip:1 holds %d", r.Remaining)
		}
	})

	t.Run("the race: 40 concurrent MTAKEs on two slots admit exactly 5", func(t *testing.T) {
		ip, acct := "ip:198.51.100.1", "account:carol"
		var wg sync.WaitGroup
		var mu sync.Mutex
		admitted := 0
		for range 40 {
			wg.Go(func() {
				ok, _, err := mtake(ctx, cl, ip, 1, acct, 1)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				if ok {
					admitted++
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		if admitted != 5 {
			t.Fatalf("admitted %d, want 5 (the account limit)", admitted)
		}
		if r := peek(ctx, t, cl, ip); r.Remaining != 45 {
			t.Fatalf("the IP bucket holds %d, want 45: every refused take given back", r.Remaining)
		}
	})
}

// CL.THROTTLE through the sluice binary on a real cluster, compared with
// redis-cell's documented example and with high rates.
func TestThrottleOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	p := startSluice(t, "--cluster", strings.Join(c.Addrs(), ","))
	cl := p.client(t)
	ctx := context.Background()
	throttle := func(args ...any) []int64 {
		t.Helper()
		v, err := cl.Do(ctx, append([]any{"CL.THROTTLE"}, args...)...).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	t.Run("redis-cell's example", func(t *testing.T) {
		if got := fmt.Sprint(throttle("user123", 15, 30, 60)); got != "[0 16 15 -1 2]" {
			t.Fatalf("CL.THROTTLE user123 15 30 60 = %s, want [0 16 15 -1 2]", got)
		}
		// 15 more empty the burst; the next is limited, with a retry of one
		// emission interval (2 s) at most.
		for range 15 {
			throttle("user123", 15, 30, 60)
		}
		v := throttle("user123", 15, 30, 60)
		if v[0] != 1 || v[1] != 16 || v[2] != 0 || v[3] < 1 || v[3] > 2 || v[4] < 31 || v[4] > 32 {
			t.Fatalf("17th call = %v, want [1 16 0 1..2 31..32]", v)
		}
	})

	t.Run("quantity: 0 peeks, more than the burst never succeeds", func(t *testing.T) {
		if got := fmt.Sprint(throttle("q", 4, 1, 1, 0)); got != "[0 5 5 -1 0]" {
			t.Fatalf("quantity 0 on a fresh key = %s, want [0 5 5 -1 0]", got)
		}
		if v := throttle("q", 4, 1, 1, 6); v[0] != 1 || v[3] != -1 {
			t.Fatalf("quantity 6 of a burst of 5 = %v, want limited with retry -1", v)
		}
	})

	t.Run("high rates: 2,000,000 per second", func(t *testing.T) {
		// redis-cell computes in whole ns and broke above 1,000/s; here a
		// burst of 1,000,000 drains and refills at the exact rate.
		v := throttle("fast", 999_999, 2_000_000, 1, 1_000_000)
		if v[0] != 0 || v[1] != 1_000_000 || v[2] != 0 || v[4] != 1 {
			t.Fatalf("draining 1,000,000 = %v, want [0 1000000 0 -1 1]", v)
		}
		v = throttle("fast", 999_999, 2_000_000, 1, 1_000_000)
		if v[0] != 1 || v[3] != 1 {
			t.Fatalf("an immediate second 1,000,000 = %v, want limited, retry 1 s (0.5 s rounded up)", v)
		}
	})

	t.Run("shared by two instances", func(t *testing.T) {
		q := startSluice(t, "--cluster", strings.Join(c.Addrs(), ","))
		cl2 := q.client(t)
		admitted := 0
		for i := range 10 {
			c := cl
			if i%2 == 1 {
				c = cl2
			}
			v, err := c.Do(ctx, "CL.THROTTLE", "shared", 4, 1, 3600).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			if v[0] == 0 {
				admitted++
			}
		}
		if admitted != 5 {
			t.Fatalf("admitted %d through two instances, want 5 (max_burst 4 + 1)", admitted)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			args []any
			want string
		}{
			{[]any{"CL.THROTTLE", "k", 1, 1}, "ERR wrong number of arguments for 'cl.throttle' command"},
			{[]any{"CL.THROTTLE", "k", -1, 1, 1}, "ERR max_burst must be a non-negative integer"},
			{[]any{"CL.THROTTLE", "k", 1, 0, 1}, "ERR count must be a positive integer"},
			{[]any{"CL.THROTTLE", "k", 1, 1, "x"}, "ERR period must be a positive integer (seconds)"},
			{[]any{"CL.THROTTLE", "k", 1, 1, 1, -2}, "ERR quantity must be a non-negative integer"},
		} {
			err := cl.Do(ctx, tc.args...).Err()
			if err == nil || err.Error() != tc.want {
				t.Errorf("%v: %v, want %s", tc.args, err, tc.want)
			}
		}
	})
}
