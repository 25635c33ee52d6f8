package cluster

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// A pipeline slot keeps its connection from one pipeline to the next, and
// a connection the node closed is replaced: after CLIENT KILL of every
// connection of the store, each slot fails at most once (unavailable, for
// on_store_error: never an error reply), and then the store answers again
// on new connections.
func TestLinksAreKeptAndReplaced(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	const pipelines = 2
	s, err := New(Config{URL: "redis://" + n.Addr, Timeout: 5 * time.Second, Pipelines: pipelines})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	side := redis.NewClient(&redis.Options{Addr: n.Addr})
	defer side.Close()
	p := &limit.Policy{Limit: 1_000_000, Rate: 1, Period: time.Hour}
	take := func(i int) limit.Result { return takeN(ctx, s, p, "link:"+strconv.Itoa(i))[0] }
	received := func() int64 {
		t.Helper()
		info, err := side.Info(ctx, "stats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "total_connections_received:"); ok {
				x, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return x
			}
		}
		t.Fatal("no total_connections_received in INFO stats")
		return 0
	}

	for i := range 2 * pipelines { // every slot opens its connection
		if r := take(i); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	before := received()
	const calls = 100
	for i := range calls {
		if r := take(i); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if got := received() - before; got != 0 {
		t.Errorf("%d sequential calls opened %d connections, want 0: the slots' connections are kept", calls, got)
	}

	if err := side.Do(ctx, "client", "kill", "type", "normal", "skipme", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i := 0; i < 2*pipelines+10; i++ {
		r := take(1000 + i)
		switch {
		case r.Err == nil:
			continue
		case errors.Is(r.Err, limit.ErrUnavailable):
			failed++
		default:
			t.Fatalf("call %d after the kill: %v, want an answer or unavailable", i, r.Err)
		}
		if i >= pipelines {
			t.Fatalf("call %d after the kill still fails (%v): a slot's broken connection was not replaced", i, r.Err)
		}
	}
	t.Logf("after CLIENT KILL: %d of %d calls unavailable", failed, 2*pipelines+10)
	if failed > pipelines {
		t.Errorf("%d calls failed after the kill, want at most one per slot (%d)", failed, pipelines)
	}
}

// A pool smaller than the pipeline slots is raised: every slot holds a
// connection, and concurrent calls, which keep both slots busy, are all
// answered (with a pool of one, the second slot would wait for a
// connection until its deadline).
func TestPoolHoldsEveryLink(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	s, err := New(Config{URL: "redis://" + n.Addr, Timeout: 2 * time.Second, Pipelines: 2, PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := &limit.Policy{Limit: 1_000_000, Rate: 1, Period: time.Hour}
	var wg sync.WaitGroup
	var failed atomic.Int64
	var first atomic.Value
	for c := range 16 {
		wg.Go(func() {
			for i := range 20 {
				if r := takeN(t.Context(), s, p, "pool:"+strconv.Itoa(c)+":"+strconv.Itoa(i))[0]; r.Err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, r.Err.Error())
				}
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f != 0 {
		t.Errorf("%d of %d calls failed (first: %v), want 0", f, 16*20, first.Load())
	}
	if got := s.cfg.PoolSize; got != 3 {
		t.Errorf("PoolSize %d, want Pipelines + 1 = 3", got)
	}
}
