package limiter

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

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
