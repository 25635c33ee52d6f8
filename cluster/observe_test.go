package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// recorder is an Observer that remembers what it was told.
type recorder struct {
	mu        sync.Mutex
	pipelines map[string]int // node → round trips
	commands  map[string]int // node → commands in them
	errs      map[string]int // node + " " + kind → count
}

func newRecorder() *recorder {
	return &recorder{pipelines: map[string]int{}, commands: map[string]int{}, errs: map[string]int{}}
}

func (r *recorder) Pipeline(node string, d time.Duration, commands int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d <= 0 {
		panic(fmt.Sprintf("round trip of %v", d))
	}
	r.pipelines[node]++
	r.commands[node] += commands
}

func (r *recorder) Error(node, kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs[node+" "+kind]++
}

func (r *recorder) count(m map[string]int, k string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return m[k]
}

// The Observer hears of round trips, NOSCRIPT, errors Redis returns,
// timeouts and fast failures of an open breaker, on a real Redis.
func TestObserver(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	rec := newRecorder()
	s, err := New(Config{URL: "redis://" + n.Addr, Timeout: 100 * time.Millisecond, BreakerThreshold: 2, BreakerCooldown: time.Hour, Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	p := &limit.Policy{Name: "p", Limit: 100, Rate: 1, Period: time.Hour}

	// A fresh queue loads the batch library with its first batch: FUNCTION
	// LOAD and FCALL in one round trip; the eight keys (at least minBatch)
	// go in one call.
	if minBatch > 8 {
		t.Fatalf("minBatch is %d: give this test that many keys", minBatch)
	}
	if r := takeN(ctx, s, p, "a", "b", "c", "d", "e", "f", "g", "h")[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := rec.count(rec.errs, n.Addr+" "+KindNoScript); got != 0 {
		t.Errorf("noscript errors = %d, want 0", got)
	}
	if got := rec.count(rec.pipelines, n.Addr); got != 1 {
		t.Errorf("round trips = %d, want 1 (FUNCTION LOAD and FCALL)", got)
	}
	if got := rec.count(rec.commands, n.Addr); got != 1 {
		t.Errorf("commands = %d, want 1", got)
	}
	// The node loses its functions: "Function not found", then FUNCTION
	// LOAD and FCALL again, two more round trips.
	rcf := redis.NewClient(&redis.Options{Addr: n.Addr})
	defer rcf.Close()
	if err := rcf.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if r := takeN(ctx, s, p, "a2", "b2", "c2", "d2", "e2", "f2", "g2", "h2")[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := rec.count(rec.errs, n.Addr+" "+KindNoScript); got != 1 {
		t.Errorf("noscript errors after FUNCTION FLUSH = %d, want 1", got)
	}
	if got := rec.count(rec.pipelines, n.Addr); got != 3 {
		t.Errorf("round trips = %d, want 3 (then FCALL, FUNCTION LOAD and FCALL)", got)
	}
	if got := rec.count(rec.commands, n.Addr); got != 3 {
		t.Errorf("commands = %d, want 3", got)
	}

	// Each by its own script: three of each.
	perKey := newRecorder()
	pk, err := New(Config{URL: "redis://" + n.Addr, Timeout: time.Second, PerKey: true, Observer: perKey})
	if err != nil {
		t.Fatal(err)
	}
	defer pk.Close()
	if r := takeN(ctx, pk, &limit.Policy{Algorithm: limit.GCRA, Limit: 100, Rate: 1, Period: time.Hour}, "a", "b", "c")[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	if got, pipes, cmds := perKey.count(perKey.errs, n.Addr+" "+KindNoScript), perKey.count(perKey.pipelines, n.Addr), perKey.count(perKey.commands, n.Addr); got != 3 || pipes != 2 || cmds != 6 {
		t.Errorf("per key: noscript errors %d, round trips %d, commands %d; want 3, 2, 6", got, pipes, cmds)
	}

	// A key holding another type: Redis says no, a bug to surface.
	rc := redis.NewClient(&redis.Options{Addr: n.Addr})
	defer rc.Close()
	if err := rc.RPush(ctx, Key("list"), "x").Err(); err != nil {
		t.Fatal(err)
	}
	if r := takeN(ctx, s, p, "list")[0]; r.Err == nil || errors.Is(r.Err, limit.ErrUnavailable) {
		t.Fatalf("take of a list: %v, want an error Redis returned", r.Err)
	}
	if got := rec.count(rec.errs, n.Addr+" "+KindRedisError); got != 1 {
		t.Errorf("redis_error = %d, want 1", got)
	}

	// Paused: timeouts, until the breaker opens; then fast failures.
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n.Resume() }()
	// The breaker opens after 2 timeouts and an unanswered PING (100 ms,
	// MaxTimeout), asked on its own goroutine: takes go on timing out
	// meanwhile, then fail at once.
	deadline := time.Now().Add(10 * time.Second)
	for rec.count(rec.errs, n.Addr+" "+KindBreakerOpen) == 0 {
		if r := takeN(ctx, s, p, "a")[0]; !errors.Is(r.Err, limit.ErrUnavailable) {
			t.Fatalf("take while paused: %v, want unavailable", r.Err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the breaker did not open within 10s of the pause")
		}
	}
	if got := rec.count(rec.errs, n.Addr+" "+KindTimeout); got < 2 || got > 4 {
		t.Errorf("timeouts = %d, want 2 (the breaker threshold) to 4 (the takes during its PING)", got)
	}
	if got := rec.count(rec.errs, n.Addr+" "+KindBreakerOpen); got != 1 {
		t.Errorf("breaker_open = %d, want 1", got)
	}
}

// errKind on errors Redis and the network really return, and on the
// ones the store makes itself.
func TestErrKind(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	ln.Close()
	refused := redis.NewClient(&redis.Options{Addr: closedAddr, MaxRetries: -1}).Ping(context.Background()).Err()

	for _, tc := range []struct {
		err  error
		want string
	}{
		{ErrCircuitOpen, KindBreakerOpen},
		{context.DeadlineExceeded, KindTimeout},
		{&net.OpError{Op: "read", Err: timeoutErr{}}, KindTimeout},
		{refused, KindConnection},
		{io.EOF, KindConnection},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), KindConnection},
		{redis.ErrPoolTimeout, KindConnection},
		{redis.ErrClosed, KindRedisError},
		{ErrClosed, KindRedisError},
		{errors.New(`redis: can't parse array/set/push reply: "$12"`), KindRedisError},
		{redisErr("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."), KindClusterDown},
		{redisErr("ERR max number of clients reached"), KindClusterDown},
		{redisErr("NOAUTH Authentication required."), KindRedisError},
		{redisErr("NOSCRIPT No matching script."), KindNoScript},
		{redisErr("WRONGTYPE Operation against a key holding the wrong kind of value"), KindRedisError},
		{redisErr("LOADING Redis is loading the dataset in memory"), KindClusterDown},
	} {
		if got := errKind(tc.err); got != tc.want {
			t.Errorf("errKind(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// redisErr stands for an error reply (go-redis's redis.Error).
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}
