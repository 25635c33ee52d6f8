package rls_test

import (
	"context"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/local"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/rls"
)

// A descriptor that matches a concurrency policy cannot be decided by
// Envoy's protocol (a slot needs its release): the call is refused whole
// with FailedPrecondition naming the policy and RL.ACQUIRE, before
// anything is spent on its other descriptors, never Internal (a bug) and
// never a decision the policy did not make.
func TestDoorConcurrencyPolicy(t *testing.T) {
	t.Parallel()
	set, err := policy.Parse([]byte(`defaults: {on_store_error: closed}
policies:
  - {name: jobs, match: "edge:job=*", algorithm: concurrency, limit: 2, period: 1m}
  - {name: per-path, match: "edge:path=*", limit: 1, rate: 1, period: 1h}
`), "jobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limiter.New(limiter.Config{Policies: set, Store: local.New(local.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	c := startDoor(t, lim, rls.Config{Matcher: rls.PolicyMatcher(set.Match)})
	ctx := context.Background()
	call := func(ds ...*ratelimitv3.RateLimitDescriptor) (*rlsv3.RateLimitResponse, error) {
		return c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: ds})
	}
	peek := hits(desc("job", "render"), 0)
	for _, ds := range [][]*ratelimitv3.RateLimitDescriptor{
		{desc("job", "render")},
		{desc("path", "/a"), desc("job", "render")},
		{desc("job", "render"), desc("path", "/a")},
		{peek, desc("path", "/a")},
	} {
		resp, err := call(ds...)
		st := status.Convert(err)
		t.Logf("%d descriptors: %s: %s", len(ds), st.Code(), st.Message())
		if err == nil || st.Code() != codes.FailedPrecondition ||
			!strings.Contains(st.Message(), "concurrency policy 'jobs'") || !strings.Contains(st.Message(), "RL.ACQUIRE") {
			t.Errorf("%d descriptors: %v %v, want FailedPrecondition naming policy 'jobs' and RL.ACQUIRE", len(ds), resp, err)
		}
	}
	// Nothing was spent on per-path (limit 1): one call passes, the next not.
	for i, want := range []rlsv3.RateLimitResponse_Code{ok, over} {
		resp, err := call(desc("path", "/a"))
		if err != nil || resp.GetOverallCode() != want {
			t.Fatalf("path call %d: %v %v, want %s", i, resp, err, want)
		}
	}
}
