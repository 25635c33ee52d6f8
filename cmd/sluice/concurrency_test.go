package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

const concurrencyConfig = `defaults:
  on_store_error: closed
policies:
  - {name: jobs, match: "jobs:*", algorithm: concurrency, limit: 5, period: 10s}
  - {name: pair, match: "pair:*", algorithm: concurrency, limit: 2, period: 10s}
  - {name: api, match: "*", limit: 100, rate: 100, period: 1s}
`

// slotReply is one RL.ACQUIRE reply.
type slotReply struct {
	reply
	Token string
}

func acquire(ctx context.Context, c *redis.Client, key string, ttl ...int64) (slotReply, error) {
	args := []any{"RL.ACQUIRE", key}
	for _, t := range ttl {
		args = append(args, t)
	}
	v, err := c.Do(ctx, args...).Slice()
	if err != nil {
		return slotReply{}, err
	}
	if len(v) != 7 {
		return slotReply{}, fmt.Errorf("reply has %d elements, want 7: %v", len(v), v)
	}
	n := make([]int64, 5)
	for i := range 5 {
		x, ok := v[i].(int64)
		if !ok {
			return slotReply{}, fmt.Errorf("element %d is %T, want integer", i+1, v[i])
		}
		n[i] = x
	}
	by, ok1 := v[5].(string)
	tok, ok2 := v[6].(string)
	if !ok1 || !ok2 {
		return slotReply{}, fmt.Errorf("elements 6 and 7 are %T and %T, want bulk strings", v[5], v[6])
	}
	return slotReply{reply{n[0] == 1, n[1], n[2], n[3], n[4], by}, tok}, nil
}

func release(ctx context.Context, c *redis.Client, key, token string) (bool, error) {
	n, err := c.Do(ctx, "RL.RELEASE", key, token).Int64()
	return n == 1, err
}

// TestConcurrencyOnCluster runs RL.ACQUIRE and RL.RELEASE through two
// sluice processes on one real 3+3 Redis Cluster: the replies and errors,
// tokens that do nothing under another key, RL.RESET, and 20 holders on
// the two instances that never hold more than the limit.
func TestConcurrencyOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	args := []string{"--config", writeConfig(t, concurrencyConfig), "--cluster", strings.Join(c.Addrs(), ",")}
	a, b := startSluice(t, args...).client(t), startSluice(t, args...).client(t)
	ctx := t.Context()

	t.Run("replies", func(t *testing.T) { concurrencyReplies(t, a, b) })
	t.Run("errors", func(t *testing.T) { concurrencyErrors(t, a) })
	t.Run("twenty holders", func(t *testing.T) {
		over, under, n := holders(t, []*redis.Client{a, b}, "jobs:{h}:race", 20, 10)
		t.Logf("20 holders on two instances, %d slots held in all: max held %d (over-count: acquire sent → release answered), %d (under-count: acquire answered → release sent), limit 5", n, over, under)
		if under > 5 {
			t.Fatalf("%d slots certainly held at one moment, limit 5", under)
		}
		if n < 150 || under < 2 {
			t.Fatalf("%d slots held, at most %d at once: the holders did not contend", n, under)
		}
	})
	t.Run("the check can fail", func(t *testing.T) {
		// Two embedded instances keep a limit each: the holders hold up to
		// twice the limit, and the under-count must see more than 5.
		cfg := []string{"--config", writeConfig(t, concurrencyConfig)}
		e1, e2 := startSluice(t, cfg...).client(t), startSluice(t, cfg...).client(t)
		over, under, n := holders(t, []*redis.Client{e1, e2}, "jobs:{h}:race", 20, 10)
		t.Logf("the same on two embedded instances (a limit each): %d held, max %d over-count, %d under-count", n, over, under)
		if under <= 5 {
			t.Fatalf("under-count %d on two separate limits of 5: the measure cannot see an excess", under)
		}
	})
	if err := ctx.Err(); err != nil {
		t.Fatal(err)
	}
}

func concurrencyReplies(t *testing.T, a, b *redis.Client) {
	ctx := t.Context()
	key := "jobs:replies"
	var toks []string
	for i := range 5 {
		r, err := acquire(ctx, a, key)
		if err != nil || !r.Allowed || r.Limit != 5 || r.Remaining != int64(4-i) || r.Retry != -1 || r.ResetMs < 9000 || r.ResetMs > 10000 || r.DecidedBy != "store" || len(r.Token) != 32 {
			t.Fatalf("acquire %d: %+v %v", i, r, err)
		}
		toks = append(toks, r.Token)
	}
	r, err := acquire(ctx, b, key, 1000)
	if err != nil || r.Allowed || r.Remaining != 0 || r.Retry < 1 || r.Retry > 10000 || r.Token != "" {
		t.Fatalf("sixth acquire: %+v %v, want refused with a retry and no token", r, err)
	}
	if held, err := release(ctx, b, "jobs:other", toks[0]); held || err != nil {
		t.Fatalf("release of the token under another key: %v %v, want 0", held, err)
	}
	if held, err := release(ctx, b, key, toks[0]); !held || err != nil {
		t.Fatalf("release on the other instance: %v %v", held, err)
	}
	if held, err := release(ctx, a, key, toks[0]); held || err != nil {
		t.Fatalf("second release: %v %v, want 0", held, err)
	}
	if r, err := acquire(ctx, b, key, 1000); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("acquire after a release: %+v %v", r, err)
	}
	if n, err := a.Do(ctx, "RL.RESET", key).Int64(); n != 1 || err != nil {
		t.Fatalf("RL.RESET: %d %v", n, err)
	}
	if held, _ := release(ctx, a, key, toks[1]); held {
		t.Fatal("a slot survived RL.RESET")
	}
	if r, err := acquire(ctx, a, key); err != nil || r.Remaining != 4 {
		t.Fatalf("after RL.RESET: %+v %v, want every slot free", r, err)
	}
}

func concurrencyErrors(t *testing.T, c *redis.Client) {
	ctx := t.Context()
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"RL.TAKE", "jobs:x"}, "ERR rl.take does not apply to concurrency policy 'jobs': use RL.ACQUIRE and RL.RELEASE"},
		{[]any{"RL.PEEK", "jobs:x"}, "ERR rl.peek does not apply to concurrency policy 'jobs': use RL.ACQUIRE and RL.RELEASE"},
		{[]any{"RL.MTAKE", "api:x", 1, "jobs:x", 1}, "ERR rl.mtake does not apply to concurrency policy 'jobs': use RL.ACQUIRE and RL.RELEASE"},
		{[]any{"RL.ACQUIRE", "api:x"}, "ERR rl.acquire does not apply to token_bucket policy 'api': use RL.TAKE"},
		{[]any{"RL.RELEASE", "api:x", "abc"}, "ERR rl.release does not apply to token_bucket policy 'api': use RL.TAKE"},
		{[]any{"RL.ACQUIRE"}, "ERR wrong number of arguments for 'rl.acquire' command"},
		{[]any{"RL.ACQUIRE", "jobs:x", 1, 2}, "ERR wrong number of arguments for 'rl.acquire' command"},
		{[]any{"RL.RELEASE", "jobs:x"}, "ERR wrong number of arguments for 'rl.release' command"},
		{[]any{"RL.ACQUIRE", "jobs:x", 0}, "ERR ttl_ms must be a positive integer of at most 86400000 (24h0m0s)"},
		{[]any{"RL.ACQUIRE", "jobs:x", -5}, "ERR ttl_ms must be a positive integer of at most 86400000 (24h0m0s)"},
		{[]any{"RL.ACQUIRE", "jobs:x", "1.5"}, "ERR ttl_ms must be a positive integer of at most 86400000 (24h0m0s)"},
		{[]any{"RL.ACQUIRE", "jobs:x", 86400001}, "ERR ttl_ms must be a positive integer of at most 86400000 (24h0m0s)"},
		{[]any{"RL.ACQUIRE", ""}, "ERR key must not be empty"},
		{[]any{"RL.RELEASE", "jobs:x", ""}, "ERR token must not be empty"},
		{[]any{"RL.RELEASE", "jobs:x", strings.Repeat("a", 65)}, "ERR token must be at most 64 bytes"},
	} {
		err := c.Do(ctx, tc.args...).Err()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if r, err := acquire(ctx, c, "jobs:x", 86400000); err != nil || !r.Allowed {
		t.Errorf("ttl_ms at the cap: %+v %v", r, err)
	}
}

// hold is one slot held by a holder, as the holder saw it: the acquire
// sent and answered, the release sent and answered.
type hold struct{ sentA, gotA, sentR, gotR time.Time }

// holders runs n holders on key, spread over clients, each holding rounds
// slots one after the other (at most 100×rounds tries); a granted slot is held a random 2–10ms and released. It
// returns the most slots held at one moment counted two ways from the
// holders' clocks: over, from the acquire's send to the release's answer
// (at least what the store held, and more), and under, from the acquire's
// answer to the release's send (at most what the store held), and the
// slots held in all.
func holders(t *testing.T, clients []*redis.Client, key string, n, rounds int) (over, under, held int) {
	ctx := t.Context()
	var mu sync.Mutex
	var holds []hold
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[g%len(clients)]
			for got, tries := 0, 0; got < rounds && tries < 100*rounds; tries++ {
				var h hold
				h.sentA = time.Now()
				r, err := acquire(ctx, c, key)
				h.gotA = time.Now()
				if err != nil {
					errs <- err
					return
				}
				if !r.Allowed {
					continue
				}
				time.Sleep(time.Duration(2000+rand.IntN(8000)) * time.Microsecond) // the work done under the slot
				h.sentR = time.Now()
				ok, err := release(ctx, c, key, r.Token)
				h.gotR = time.Now()
				if err != nil || !ok {
					errs <- fmt.Errorf("release of a held slot: %v %v", ok, err)
					return
				}
				got++
				mu.Lock()
				holds = append(holds, h)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return maxOverlap(holds, func(h hold) (time.Time, time.Time) { return h.sentA, h.gotR }),
		maxOverlap(holds, func(h hold) (time.Time, time.Time) { return h.gotA, h.sentR }), len(holds)
}

// maxOverlap is the most intervals (span of each hold) open at one moment;
// an interval closing at the instant another opens counts with it.
func maxOverlap(holds []hold, span func(hold) (time.Time, time.Time)) int {
	type event struct {
		at   time.Time
		open int
	}
	var ev []event
	for _, h := range holds {
		from, to := span(h)
		if to.Before(from) {
			continue // never certainly held
		}
		ev = append(ev, event{from, 1}, event{to, -1})
	}
	slices.SortFunc(ev, func(x, y event) int {
		if c := x.at.Compare(y.at); c != 0 {
			return c
		}
		return y.open - x.open // opens first: over-count only
	})
	best, n := 0, 0
	for _, e := range ev {
		n += e.open
		best = max(best, n)
	}
	return best
}

// TestConcurrencyKilledHolder kills a holder process with SIGKILL while
// it holds a slot of ttl_ms 500: the slot frees itself after its TTL,
// never before.
func TestConcurrencyKilledHolder(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	args := []string{"--config", writeConfig(t, concurrencyConfig), "--cluster", strings.Join(c.Addrs(), ",")}
	s := startSluice(t, args...)
	cl := s.client(t)
	ctx := t.Context()
	key := "pair:killed"
	if r, err := acquire(ctx, cl, key); err != nil || !r.Allowed {
		t.Fatalf("the parent's slot: %+v %v", r, err)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestConcurrencyHolderChild$")
	child.Env = append(os.Environ(), "SLUICE_HOLDER="+s.Addr+" "+key)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "held ") {
		t.Fatalf("child: %q %v", line, err)
	}
	sentNs, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "held ")), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	sent := time.Unix(0, sentNs)
	refused := 0
	for {
		r, err := acquire(ctx, cl, key)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			break
		}
		refused++
		if time.Since(sent) > 10*time.Second {
			t.Fatalf("the killed holder's slot is still held after 10s: %+v", r)
		}
		time.Sleep(5 * time.Millisecond) // a polling interval, not a synchronisation
	}
	freed := time.Since(sent)
	const slack = 10 * time.Millisecond // Redis's clock and this one are the same machine's
	t.Logf("a slot of ttl_ms 500 held by a killed process freed %s after its acquire was sent (%d acquires refused meanwhile)", freed.Round(time.Millisecond), refused)
	if freed < 500*time.Millisecond-slack {
		t.Fatalf("freed after %s, before its TTL of 500ms", freed)
	}
}

// TestConcurrencyHolderChild is the holder process of
// TestConcurrencyKilledHolder: it acquires a slot of ttl_ms 500, says when
// it sent the acquire, and waits to be killed.
func TestConcurrencyHolderChild(t *testing.T) {
	env := os.Getenv("SLUICE_HOLDER")
	if env == "" {
		t.Skip("the holder process of TestConcurrencyKilledHolder")
	}
	addr, key, _ := strings.Cut(env, " ")
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	sent := time.Now()
	r, err := acquire(context.Background(), c, key, 500)
	if err != nil || !r.Allowed {
		fmt.Printf("refused %+v %v\n", r, err)
		os.Exit(1)
	}
	fmt.Printf("held %d\n", sent.UnixNano())
	select {}
}
