package rls_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/local"
	"github.com/sluice-rl/sluice/rls"
)

// BenchmarkShouldRateLimit is the gRPC door's own cost: ShouldRateLimit
// with one descriptor over a real loopback gRPC connection, decided by the
// limiter over the in-process store (no Redis), client and server in this
// process. -cpuprofile shows where a call goes.
func BenchmarkShouldRateLimit(b *testing.B) {
	p := &limit.Policy{Name: "all", Limit: 1_000_000_000, Rate: 1_000_000_000, Period: time.Second, OnStoreError: limit.FailClosed}
	lim, err := limiter.New(limiter.Config{Policies: limiter.MatcherFunc(func(string) *limit.Policy { return p }), Store: local.New(local.Config{})})
	if err != nil {
		b.Fatal(err)
	}
	door := startDoor(b, lim, rls.Config{Matcher: rls.PolicyMatcher(func(string) *limit.Policy { return p })})
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := strconv.FormatInt(n.Add(1)%65536, 10)
			if _, err := door.ShouldRateLimit(b.Context(), req("bench", 0, desc("key", k))); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
