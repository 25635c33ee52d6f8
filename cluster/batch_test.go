package cluster

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/lua"
)

func totals(s *Store) (pipelines, commands int64) {
	pipelines, commands, _ = allTotals(s)
	return pipelines, commands
}

func allTotals(s *Store) (pipelines, commands, decisions int64) {
	for _, n := range s.Stats() {
		pipelines += n.Pipelines
		commands += n.Commands
		decisions += n.Decisions
	}
	return pipelines, commands, decisions
}

// Concurrent batches from many callers share pipelines; a lone request is
// one pipeline of one command, sent without waiting for company.
func TestConcurrentCallersSharePipelines(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	s, err := New(Config{URL: "redis://" + node.Addr, Timeout: 5 * time.Second, Pipelines: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	p := &limit.Policy{Limit: 1000, Rate: 1, Period: time.Hour}
	warm := make([]limit.Result, 1)
	s.Do(ctx, []limit.Request{{Key: "warm", Cost: 1, Policy: p}}, warm) // loads the script
	p0, c0, d0 := allTotals(s)

	const callers, each = 64, 50
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			out := make([]limit.Result, 1)
			for i := range each {
				s.Do(ctx, []limit.Request{{Key: "share:" + strconv.Itoa(c), Cost: 1, Policy: p}}, out)
				if out[0].Err != nil || !out[0].Allowed || out[0].Remaining != int64(1000-i-1) {
					t.Errorf("caller %d take %d: %+v", c, i, out[0])
					return
				}
			}
		})
	}
	wg.Wait()
	pipes, cmds, decs := allTotals(s)
	pipes, cmds, decs = pipes-p0, cmds-c0, decs-d0
	t.Logf("%d callers × %d takes: %d decisions by %d script calls in %d pipelines (%.1f decisions per pipeline)", callers, each, decs, cmds, pipes, float64(decs)/float64(pipes))
	if decs != callers*each {
		t.Fatalf("%d decisions sent, want %d", decs, callers*each)
	}
	if pipes >= decs {
		t.Fatalf("no batching: %d pipelines for %d decisions", pipes, decs)
	}
	if cmds > pipes*2 { // a pipeline is one batch call, and perhaps a lone one beside it
		t.Fatalf("%d script calls in %d pipelines: the batch script did not decide them", cmds, pipes)
	}

	out := make([]limit.Result, 1)
	s.Do(ctx, []limit.Request{{Key: "lone", Cost: 1, Policy: p}}, out)
	p2, c2 := totals(s)
	if out[0].Err != nil || p2-p0-pipes != 1 || c2-c0-cmds != 1 {
		t.Fatalf("lone request: %+v, %d pipelines and %d commands sent", out[0], p2-p0-pipes, c2-c0-cmds)
	}
}

// BenchmarkStore is the cluster store against a real 3+3 cluster: many
// goroutines, each one RL.TAKE per Do, as concurrent connections at
// pipeline 1 would send; uniform keys and one hot key. Besides ns/op it
// reports the client's CPU per decision (getrusage), script calls per
// pipeline, and how the units went out: sent by their own caller (an idle
// node's, or the head of a busy one's queue, head.go) or queued for a
// worker.
func BenchmarkStore(b *testing.B) {
	c := redistest.NewCluster(b, localredis.Config{})
	s, err := New(Config{Addrs: c.Addrs(), Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	p := &limit.Policy{Limit: 1 << 40, Rate: 1_000_000_000, Period: time.Second}
	for _, tc := range []struct {
		name        string
		keys, perDo int
	}{
		{"keys=1000000", 1_000_000, 1},
		{"keys=1", 1, 1},
		{"keys=1000000/per-Do=16", 1_000_000, 16}, // as connections at pipeline 16: a Do reaches every node
	} {
		b.Run(tc.name, func(b *testing.B) {
			p0, c0, d0 := allTotals(s)
			u0 := unitsOf(s)
			b.SetParallelism(25) // 50 goroutines on 2 cores
			b.ReportAllocs()
			cpu0, sched0 := processCPU(b), readSched(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				out := make([]limit.Result, tc.perDo)
				reqs := make([]limit.Request, tc.perDo)
				for i := range reqs {
					reqs[i] = limit.Request{Cost: 1, Policy: p}
				}
				i := 0
				for pb.Next() {
					for j := range reqs {
						reqs[j].Key = "bench:" + strconv.Itoa(i*7919%tc.keys)
						i++
					}
					s.Do(context.Background(), reqs, out)
					for j := range out {
						if out[j].Err != nil || !out[j].Allowed {
							b.Fatalf("%+v", out[j])
						}
					}
				}
			})
			b.StopTimer()
			decisions := float64(b.N * tc.perDo)
			b.ReportMetric((processCPU(b)-cpu0)/decisions, "client-cpu-µs/decision")
			reportSched(b, sched0, decisions)
			p1, c1, d1 := allTotals(s)
			b.ReportMetric(float64(c1-c0)/float64(max(1, p1-p0)), "cmds/pipeline")
			b.ReportMetric(float64(d1-d0)/float64(max(1, p1-p0)), "decisions/pipeline")
			reportUnits(b, s, u0, decisions)
		})
	}
}

// BenchmarkAutoPipeline is the same load through go-redis's experimental
// AutoPipeline with default options: the alternative to our batcher that
// docs/performance.md compares (same cluster, same script, same concurrency).
func BenchmarkAutoPipeline(b *testing.B) {
	c := redistest.NewCluster(b, localredis.Config{})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), MaxRetries: -1, DisableIdentity: true})
	defer cc.Close()
	ctx := context.Background()
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		return n.ScriptLoad(ctx, lua.TokenBucket.Src).Err()
	}); err != nil {
		b.Fatal(err)
	}
	ap, err := cc.AutoPipeline()
	if err != nil {
		b.Fatal(err)
	}
	sum := sha1.Sum([]byte(lua.TokenBucket.Src))
	sha := hex.EncodeToString(sum[:])
	p := &limit.Policy{Limit: 1 << 40, Rate: 1_000_000_000, Period: time.Second}
	bk, _ := p.Bucket()
	for _, keys := range []int{1_000_000, 1} {
		b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
			b.SetParallelism(25)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					key := Key("bench:" + strconv.Itoa(i*7919%keys))
					i++
					v, err := ap.Do(ctx, "evalsha", sha, 1, key, bk.Capacity, bk.Refill, bk.Scale, 1, "0").Slice()
					if err != nil || len(v) != lua.ReplyInts || v[0] != int64(1) {
						b.Fatalf("%v %v", v, err)
					}
				}
			})
		})
	}
}

// queued is the number of units waiting in the store's node queues.
func queued(s *Store) int {
	n := 0
	s.queues.Range(func(_, v any) bool {
		q := v.(*nodeQueue)
		n += len(q.ch) + int(q.waiting.Load())
		return true
	})
	return n
}

// waitUntil polls cond every 2ms, at most d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(2 * time.Millisecond) // polling interval
	}
}

// spinScript spins on the node's clock for ARGV[1] ms, then answers like
// a rate-limit script: a slow command inside a pipeline, for real.
const spinScript = `local t0 = redis.call('TIME')
local start = t0[1] * 1000000 + t0[2]
repeat local t = redis.call('TIME') until t[1] * 1000000 + t[2] - start >= tonumber(ARGV[1]) * 1000
return {1, 1, 0, -1, 1, 1, 0}`

// One request near its deadline must not cut the time of the requests it
// shares a pipeline with. One pipeline carries a slow command (1s), a
// request whose deadline passes while the pipeline is in flight, and 100
// fresh ones: the fresh ones get the store's answers, the late one alone is
// unavailable, and the node's breaker counts no failure, since the node
// answered everything.
func TestNearDeadlineRequestKeepsItsPipelineMates(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	s, err := New(Config{URL: "redis://" + n.Addr, Timeout: 10 * time.Second, Pipelines: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	slow := &limit.Policy{Limit: 1, Rate: 1, Period: time.Hour}
	withScript(s, slow, testScript("spin", spinScript), 1000)
	warm := &limit.Policy{Limit: 1, Rate: 1, Period: time.Hour}
	withScript(s, warm, testScript("spin", spinScript), 1)
	p := &limit.Policy{Limit: 1000, Rate: 1, Period: time.Hour}
	for _, w := range []*limit.Policy{warm, p} { // load both scripts
		if r := takeN(ctx, s, w, "warm")[0]; r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	p0, _ := totals(s)

	// The node's one pipeline is busy for 1s...
	var wg sync.WaitGroup
	wg.Go(func() { takeN(ctx, s, slow, "busy") })
	waitUntil(t, 5*time.Second, "the first slow pipeline never went out", func() bool { p, _ := totals(s); return p == p0+1 })
	// ...while the next batch queues: a slow command first, then a request
	// with 1.5s left, then 100 with 10s left.
	wg.Go(func() { takeN(ctx, s, slow, "slow") })
	waitUntil(t, 5*time.Second, "the slow command never queued", func() bool { return queued(s) == 1 })
	near := make([]limit.Result, 1)
	wg.Go(func() {
		nctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		s.Do(nctx, []limit.Request{{Key: "near", Cost: 1, Policy: p}}, near)
	})
	waitUntil(t, 5*time.Second, "the near-deadline request never queued", func() bool { return queued(s) == 2 })
	const fresh = 100
	out := make([]limit.Result, fresh)
	for i := range fresh {
		wg.Go(func() {
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			s.Do(fctx, []limit.Request{{Key: "fresh:" + strconv.Itoa(i), Cost: 1, Policy: p}}, out[i:i+1])
		})
	}
	waitUntil(t, 5*time.Second, "the fresh requests never queued", func() bool { return queued(s) == 2+fresh })
	if p, _ := totals(s); p != p0+1 {
		t.Fatalf("%d pipelines went out while the node was busy; the test needs them queued", p-p0-1)
	}
	wg.Wait()

	store, unavailable := 0, 0
	var firstErr error
	for _, r := range out {
		switch {
		case r.Err == nil && r.DecidedBy == limit.ByStore && r.Allowed:
			store++
		case errors.Is(r.Err, limit.ErrUnavailable):
			unavailable++
			if firstErr == nil {
				firstErr = r.Err
			}
		}
	}
	p1, _ := totals(s)
	fails := s.breaker(n.Addr).fails.Load()
	t.Logf("%d fresh requests behind one with 1.5s left, in %d pipeline(s): %d answered by the store, %d unavailable (%v); "+
		"the near one: %v; breaker failures: %d", fresh, p1-p0-1, store, unavailable, firstErr, near[0].Err, fails)
	if store != fresh {
		t.Errorf("%d of %d fresh requests answered by the store, want all", store, fresh)
	}
	if !errors.Is(near[0].Err, limit.ErrUnavailable) {
		t.Errorf("the near-deadline request: %+v; want unavailable (its deadline passed in flight)", near[0])
	}
	if fails != 0 {
		t.Errorf("breaker failures %d, want 0: the node answered", fails)
	}
}
