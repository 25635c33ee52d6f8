package cluster

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/lua"
)

// keysOn returns n user keys whose Redis keys the primary owns.
func keysOn(ctx context.Context, t *testing.T, c *localredis.Cluster, primary *localredis.Node, prefix string, n int) []string {
	t.Helper()
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if i > 100*n {
			t.Fatalf("no %d keys on %s among %d", n, primary.Addr, i)
		}
		k := prefix + strconv.Itoa(i)
		o, err := c.PrimaryForKey(ctx, Key(k))
		if err != nil {
			t.Fatal(err)
		}
		if o == primary {
			keys = append(keys, k)
		}
	}
	return keys
}

// hasLibrary reports whether the node has the batch library.
func hasLibrary(ctx context.Context, t *testing.T, c *redis.Client) bool {
	t.Helper()
	libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: lua.BatchLibrary.Name}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(libs) == 1
}

// infoCount is the integer after field: in c's INFO section, 0 if absent.
func infoCount(ctx context.Context, t *testing.T, c *redis.Client, section, field string) int64 {
	t.Helper()
	info, err := c.Info(ctx, section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			if i := strings.Index(rest, "calls="); i >= 0 { // commandstats
				rest = rest[i+len("calls="):]
			}
			if i := strings.Index(rest, "count="); i >= 0 { // errorstats
				rest = rest[i+len("count="):]
			}
			rest, _, _ = strings.Cut(rest, ",")
			n, err := strconv.ParseInt(rest, 10, 64)
			if err != nil {
				t.Fatalf("%s %s: %q", section, field, line)
			}
			return n
		}
	}
	return 0
}

// takeAll takes one token from each key in one Do (one batch on their
// node) and fails unless each is decided with want remaining.
func takeAll(ctx context.Context, t *testing.T, s *Store, p *limit.Policy, want int64, keys []string) {
	t.Helper()
	for i, r := range takeN(ctx, s, p, keys...) {
		if r.Err != nil || !r.Allowed || r.Remaining != want {
			t.Fatalf("%s: %+v, want allowed with %d left", keys[i], r, want)
		}
	}
}

// firstDecided takes one token of each key in one Do until the store
// decides them, and returns that decision. Until the node serves its slots
// again, and on each pipeline connection that the fault broke, a batch is
// answered unavailable: it never ran, so the first decision must count
// one take, never two.
func firstDecided(t *testing.T, ctx context.Context, s *Store, p *limit.Policy, keys []string) []limit.Result {
	t.Helper()
	var rs []limit.Result
	waitUntil(t, 30*time.Second, "no decision after the fault", func() bool {
		rs = takeN(ctx, s, p, keys...)
		failed := 0
		for _, r := range rs {
			if r.Err != nil {
				failed++
			}
		}
		if failed != 0 && failed != len(rs) {
			t.Fatalf("a batch to one node half decided: %+v", rs)
		}
		return failed == 0
	})
	return rs
}

// The batch library is lost on a node three ways — FUNCTION FLUSH, a
// primary restarted empty, a failover onto a replica that never got it —
// and each time the next batch loads it again and is decided, with no
// error and nothing spent twice: each key's bucket counts exactly one take
// per batch.
func TestFunctionReloaded(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{NodeTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := New(Config{Addrs: c.Addrs(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := &limit.Policy{Limit: 100, Rate: 1, Period: time.Hour}
	owner := c.Primaries()[0]
	keys := keysOn(ctx, t, c, owner, "fn:", 4)
	left := p.Limit

	takeAll(ctx, t, s, p, left-1, keys) // the first batch loads the library
	left--
	if !hasLibrary(ctx, t, owner.Client()) {
		t.Fatal("the first batch did not load the library")
	}

	t.Run("FUNCTION FLUSH", func(t *testing.T) {
		if err := owner.Client().FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		notFound := infoCount(ctx, t, owner.Client(), "errorstats", "errorstat_ERR")
		takeAll(ctx, t, s, p, left-1, keys)
		left--
		if got := infoCount(ctx, t, owner.Client(), "errorstats", "errorstat_ERR"); got != notFound+1 {
			t.Errorf("ERR replies: %d, want %d (one Function not found)", got, notFound+1)
		}
		if !hasLibrary(ctx, t, owner.Client()) {
			t.Error("not loaded again")
		}
	})

	t.Run("restarted empty", func(t *testing.T) {
		other := c.Primaries()[1]
		okeys := keysOn(ctx, t, c, other, "fnr:", 4)
		takeAll(ctx, t, s, p, p.Limit-1, okeys)
		if err := c.RestartEmpty(ctx, other); err != nil {
			t.Fatal(err)
		}
		// Its data went with it: each key starts again, full.
		for i, r := range firstDecided(t, ctx, s, p, okeys) {
			if !r.Allowed || r.Remaining != p.Limit-1 {
				t.Errorf("%s after the restart: %+v, want allowed with %d left", okeys[i], r, p.Limit-1)
			}
		}
		if got := infoCount(ctx, t, other.Client(), "errorstats", "errorstat_ERR"); got != 1 {
			t.Errorf("ERR replies of the restarted node: %d, want 1 (one Function not found)", got)
		}
		if !hasLibrary(ctx, t, other.Client()) {
			t.Error("not loaded again")
		}
	})

	t.Run("failover onto a replica that missed it", func(t *testing.T) {
		replica := c.ReplicasOf(owner)[0]
		// The replica loses the library with its primary, then is held
		// back while the next batch loads it on the primary alone.
		if err := owner.Client().FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 10*time.Second, "the replica kept the library", func() bool { return !hasLibrary(ctx, t, replica.Client()) })
		release, err := c.HoldReplication(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		takeAll(ctx, t, s, p, left-1, keys)
		if err := owner.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := release(); err != nil {
			t.Fatal(err)
		}
		if hasLibrary(ctx, t, replica.Client()) {
			t.Fatal("the replica has the library: the test needs one that missed it")
		}
		if err := c.Takeover(ctx, replica); err != nil {
			t.Fatal(err)
		}
		// The replica has the spends from before the hold, not the take
		// above.
		for i, r := range firstDecided(t, ctx, s, p, keys) {
			if !r.Allowed || r.Remaining != left-1 {
				t.Errorf("%s after the takeover: %+v, want allowed with %d left", keys[i], r, left-1)
			}
		}
		if !hasLibrary(ctx, t, replica.Client()) {
			t.Error("the promoted replica has no library after a batch")
		}
	})
}

// A node whose ACL refuses FUNCTION and FCALL is a node without functions:
// the first batch is decided by the batch script, the store says so once
// in its log, and no later batch tries FCALL again.
func TestFunctionsRefusedFallBackToScripts(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	ctx := context.Background()
	admin := n.Client()
	if err := admin.Do(ctx, "acl", "setuser", "nofn", "on", ">pw", "~*", "+@all", "-function", "-fcall", "-fcall_ro").Err(); err != nil {
		t.Fatal(err)
	}
	var logged syncBuffer
	s, err := New(Config{URL: "redis://nofn:pw@" + n.Addr, Timeout: time.Second, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := &limit.Policy{Limit: 10, Rate: 1, Period: time.Hour}
	keys := []string{"acl:a", "acl:b", "acl:c", "acl:d"}
	for round := range 3 {
		takeAll(ctx, t, s, p, p.Limit-1-int64(round), keys)
	}
	if got := infoCount(ctx, t, admin, "errorstats", "errorstat_NOPERM"); got != 2 {
		t.Errorf("NOPERM replies: %d, want 2 (the first FUNCTION LOAD and FCALL, never again)", got)
	}
	if got := infoCount(ctx, t, admin, "commandstats", "cmdstat_evalsha"); got != 2 {
		t.Errorf("EVALSHA calls: %d, want 2 (the batches after the first, which went by EVAL)", got)
	}
	if got := strings.Count(logged.String(), "cannot run Redis Functions"); got != 1 {
		t.Errorf("logged %d times, want once:\n%s", got, logged.String())
	}
	if hasLibrary(ctx, t, admin) {
		t.Error("the library got loaded by a user who may not")
	}
}

// syncBuffer is a bytes.Buffer safe for the store's workers to log into.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A batch whose deadline passes between "Function not found" and the
// FUNCTION LOAD and FCALL that would follow was never run: it is not sent
// again, its requests are overloaded (as TestExpiredBetweenPassesIsOverload
// after NOSCRIPT), the library is not loaded for it, and nothing is spent.
func TestExpiredAfterFunctionNotFoundIsNotReplayed(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	ctx := t.Context()
	obs := &noScriptStall{}
	s, err := New(Config{URL: "redis://" + n.Addr, Timeout: time.Second, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := &limit.Policy{Name: "p", Limit: 10, Rate: 1, Period: time.Hour}
	takeAll(ctx, t, s, p, p.Limit-1, []string{"warm:1", "warm:2"}) // loads the library
	if err := s.single.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	pa, err := s.policyArgs(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.queue(n.Addr)
	if err != nil {
		t.Fatal(err)
	}
	uctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	var items []*item
	for _, k := range []string{"between:1", "between:2"} {
		items = append(items, &item{key: Key(k), script: pa.script, pa: pa, cost: 1, op: limit.OpTake, addr: n.Addr})
	}
	u := &unit{addr: n.Addr, ctx: uctx, items: items, done: make(chan struct{}), q: q, queued: time.Now().UnixNano()}
	obs.until.Store(&uctx)
	before := q.overloads.Load()
	q.send([]*unit{u}, new(link)) // Function not found; the deadline passes before the reload
	for i, it := range items {
		if err := it.res.Err; !errors.Is(err, limit.ErrOverload) {
			t.Errorf("item %d, run out of time after Function not found: %v, want overload", i, err)
		}
	}
	if got := q.overloads.Load() - before; got != int64(len(items)) {
		t.Errorf("counted %d overloaded, want %d", got, len(items))
	}
	obs.until.Store(nil)
	if hasLibrary(ctx, t, s.single) {
		t.Error("the library was loaded for a batch that had run out of time")
	}
	takeAll(ctx, t, s, p, p.Limit-1, []string{"between:1", "between:2"})
}
