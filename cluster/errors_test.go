package cluster

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/lua"
)

// testScript is a script of the test's own, under its real SHA1, so that
// NOSCRIPT loads it like any other.
func testScript(name, src string) *lua.Script {
	sum := sha1.Sum([]byte(src))
	return &lua.Script{Name: name, Src: src, SHA: hex.EncodeToString(sum[:])}
}

// withScript makes every request of p run script, with first as its first
// argument (the policy's limit in ARGV) and 0 as the next two: the store's
// per-policy argument cache is filled first.
func withScript(s *Store, p *limit.Policy, script *lua.Script, first any) {
	pa := &policyArgs{script: script, sha: script.SHA, src: script.Src, limit: first, rate: 0, unit: 0}
	s.argCache.Store(p, pa)
}

// A reply of the wrong shape is a bug, however it comes: a bulk string, an
// array holding a string, an array of five. It is an error reply, never a
// decision of on_store_error, and the node's breaker counts no failure.
func TestWrongTypeReplyIsAnError(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	rec := newRecorder()
	s, err := New(Config{URL: "redis://" + n.Addr, Timeout: 5 * time.Second, BreakerThreshold: 1, BreakerCooldown: time.Hour, Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	good := &limit.Policy{Limit: 100, Rate: 1, Period: time.Hour}
	for _, tc := range []struct{ name, src string }{
		{"bulk", "return 'not an array'"},
		{"string element", "return {1, 2, 'x', -1, 4, 0}"},
		{"five", "return {1, 2, 3, -1, 4}"},
	} {
		p := &limit.Policy{Limit: 100, Rate: 1, Period: time.Hour}
		withScript(s, p, testScript(tc.name, tc.src), 0)
		// Twice: the first call loads the script (NOSCRIPT, then EVAL),
		// the second runs it by EVALSHA.
		for round := range 2 {
			out := make([]limit.Result, 2)
			s.Do(ctx, []limit.Request{{Key: "wrong:" + tc.name, Cost: 1, Policy: p}, {Key: "good", Cost: 1, Policy: good}}, out)
			r := out[0]
			t.Logf("%s, round %d: %v", tc.name, round, r.Err)
			if r.Err == nil || errors.Is(r.Err, limit.ErrUnavailable) {
				t.Errorf("%s, round %d: err %v; want an error reply, not unavailable", tc.name, round, r.Err)
			}
			if errors.Is(out[1].Err, limit.ErrUnavailable) {
				t.Errorf("%s, round %d: the request after it: %v; want no fallback", tc.name, round, out[1].Err)
			}
		}
	}
	if st := s.BreakerStates()[n.Addr]; st != "closed" {
		t.Errorf("breaker %s after wrong replies; want closed (threshold 1)", st)
	}
	if got := rec.count(rec.errs, n.Addr+" "+KindRedisError); got == 0 {
		t.Errorf("no %s counted for the wrong replies: %v", KindRedisError, rec.errs)
	}
}

// A store used after Close answers an error, at once, not unavailable: the
// fault is the caller's, and no Redis outage should be reported for it.
func TestClosedStoreIsAnError(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{Replicas: -1})
	single := redistest.NewSingle(t)
	for _, cfg := range []Config{{Addrs: c.Addrs()}, {URL: "redis://" + single.Addr}} {
		cfg.Timeout = 5 * time.Second
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		p := &limit.Policy{Limit: 100, Rate: 1, Period: time.Hour}
		if r := takeN(context.Background(), s, p, "closed")[0]; r.Err != nil {
			t.Fatal(r.Err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		start := time.Now()
		r := takeN(ctx, s, p, "closed")[0]
		took := time.Since(start)
		_, rerr := s.Reset(ctx, "closed", p)
		cancel()
		t.Logf("%s after Close: take %v in %v; reset %v", s.mode(), r.Err, took.Round(time.Millisecond), rerr)
		if r.Err == nil || errors.Is(r.Err, limit.ErrUnavailable) || errors.Is(r.Err, context.DeadlineExceeded) {
			t.Errorf("%s: take after Close: %v; want an error that is not unavailable", s.mode(), r.Err)
		}
		if rerr == nil || errors.Is(rerr, limit.ErrUnavailable) {
			t.Errorf("%s: reset after Close: %v; want an error that is not unavailable", s.mode(), rerr)
		}
	}
}

func (s *Store) mode() string {
	if s.cc != nil {
		return "cluster"
	}
	return "single node"
}

// BUSY, a script over its time limit on the node, is a connectivity
// condition by choice: the node answers nothing else until the script ends
// or is killed, as while LOADING. It goes to on_store_error and counts
// against the node's breaker.
func TestBusyIsUnavailable(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	side := n.Client()
	if err := side.ConfigSet(ctx, "busy-reply-threshold", "50").Err(); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{URL: "redis://" + n.Addr, Timeout: 5 * time.Second, BreakerThreshold: 1, BreakerCooldown: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := &limit.Policy{Limit: 100, Rate: 1, Period: time.Hour}
	if r := takeN(ctx, s, p, "busy")[0]; r.Err != nil {
		t.Fatal(r.Err)
	}

	// A read-only script that spins for up to 10s; SCRIPT KILL ends it.
	const spin = `local t0 = redis.call('TIME') repeat local t = redis.call('TIME') until t[1] - t0[1] >= 10 return 1`
	slow := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, ReadTimeout: 15 * time.Second})
	defer slow.Close()
	spun := make(chan error, 1)
	go func() { spun <- slow.Eval(ctx, spin, nil).Err() }()
	defer func() { _ = side.ScriptKill(context.Background()).Err() }()
	probe := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
	defer probe.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := probe.Get(ctx, "probe").Err()
		if err != nil && strings.HasPrefix(err.Error(), "BUSY") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node never answered BUSY: %v", err)
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
	r := takeN(ctx, s, p, "busy")[0]
	t.Logf("take while a script runs past busy-reply-threshold: %v", r.Err)
	if !errors.Is(r.Err, limit.ErrUnavailable) || !strings.Contains(r.Err.Error(), "BUSY") {
		t.Errorf("take while BUSY: %v; want unavailable (BUSY)", r.Err)
	}
	// The breaker asks the node (PING, answered BUSY) on its own
	// goroutine before it opens.
	for deadline := time.Now().Add(5 * time.Second); s.BreakerStates()[n.Addr] != "open"; {
		if time.Now().After(deadline) {
			t.Fatalf("breaker %s 5s after BUSY with threshold 1; want open", s.BreakerStates()[n.Addr])
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
	if err := side.ScriptKill(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-spun; err == nil {
		t.Error("the spinning script was not killed")
	}
}
