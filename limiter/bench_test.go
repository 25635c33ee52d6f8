package limiter

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/denycache"
	"github.com/sluice-rl/sluice/hotkey"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// BenchmarkDecideParallel decides one request a call from every core, all
// under one cancelable context, as the server's connections share the
// server's: the per-call deadline must not register with that shared
// context (a lock every connection takes).
func BenchmarkDecideParallel(b *testing.B) {
	p := &limit.Policy{Limit: 1_000_000_000, Rate: 1_000_000_000, Period: time.Second, OnStoreError: limit.FailOpen}
	l, err := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: local.New(local.Config{})})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := "k" + strconv.FormatInt(next.Add(1), 10)
		reqs := []limit.Request{{Key: key, Cost: 1}}
		out := make([]limit.Result, 1)
		for pb.Next() {
			reqs[0].Policy = nil
			l.Decide(ctx, reqs, out)
			if !out[0].Allowed {
				b.Fatalf("%+v", out[0])
			}
		}
	})
}

// BenchmarkDecideDenyCache is the cold path of a request the store admits,
// on the in-process store posing as the shared one (decided_by store),
// without and with a deny cache: what the cache costs a request it does
// not answer (a clock read and a generation per batch, one atomic load per
// request while nothing refused is live), and a request it answers.
func BenchmarkDecideDenyCache(b *testing.B) {
	p := &limit.Policy{Limit: 1_000_000_000, Rate: 1_000_000_000, Period: time.Second, OnStoreError: limit.FailOpen}
	tight := &limit.Policy{Limit: 1, Rate: 1, Period: time.Hour, OnStoreError: limit.FailOpen}
	for _, bc := range []struct {
		name    string
		deny    bool
		p       *limit.Policy
		allowed bool
	}{{"admitted/none", false, p, true}, {"admitted/cache", true, p, true}, {"refused/none", false, tight, false}, {"refused/cache", true, tight, false}} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := Config{Policies: MatcherFunc(func(string) *limit.Policy { return bc.p }), Store: local.New(local.Config{DecidedBy: limit.ByStore})}
			if bc.deny {
				d, err := denycache.New(denycache.Config{})
				if err != nil {
					b.Fatal(err)
				}
				cfg.Deny = d
			}
			l, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			reqs := []limit.Request{{Key: "k", Cost: 1}}
			out := make([]limit.Result, 1)
			l.Decide(context.Background(), reqs, out) // the tight policy's one token
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				reqs[0].Policy = nil
				l.Decide(context.Background(), reqs, out)
				if out[0].Allowed != bc.allowed {
					b.Fatalf("%+v", out[0])
				}
			}
			b.StopTimer()
			if want := bc.deny && !bc.allowed; (out[0].DecidedBy == limit.ByDenyCache) != want {
				b.Fatalf("decided_by %s", out[0].DecidedBy)
			}
		})
	}
}

// BenchmarkDecideHotDefault is the cost of the default hot block to a cold
// key: uniform keys over 65,536, each far below any threshold, decided
// by a store posing as the shared one (not in process, so the default
// applies) with the hot-key layer, under hot mode off and under the
// default lease: the difference is Observe's count in the sketch.
func BenchmarkDecideHotDefault(b *testing.B) {
	for _, bc := range []struct {
		name string
		hot  limit.Hot
	}{{"off", limit.Hot{Mode: limit.HotOff}}, {"default", limit.Hot{Mode: limit.HotLease, Threshold: limit.DefaultHotThreshold, Default: true}}} {
		b.Run(bc.name, func(b *testing.B) {
			p := &limit.Policy{Limit: 1_000_000_000, Rate: 1_000_000_000, Period: time.Second, OnStoreError: limit.FailOpen, Hot: bc.hot}
			store := struct{ limit.Store }{local.New(local.Config{DecidedBy: limit.ByStore})}
			hot, err := hotkey.New(hotkey.Config{Store: store})
			if err != nil {
				b.Fatal(err)
			}
			defer hot.Close(context.Background())
			l, err := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: store, Hot: hot})
			if err != nil {
				b.Fatal(err)
			}
			keys := make([]string, 1<<16)
			for i := range keys {
				keys[i] = "k" + strconv.Itoa(i)
			}
			reqs := make([]limit.Request, 1)
			out := make([]limit.Result, 1)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				reqs[0] = limit.Request{Key: keys[i&(len(keys)-1)], Cost: 1}
				l.Decide(ctx, reqs, out)
				if !out[0].Allowed || out[0].DecidedBy != limit.ByStore {
					b.Fatalf("%+v", out[0])
				}
			}
			b.StopTimer()
			if s := hot.Stats(); s.HotKeys != 0 || s.Claims != 0 {
				b.Fatalf("a cold key went hot: %+v", s)
			}
		})
	}
}
