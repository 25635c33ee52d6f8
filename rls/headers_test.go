package rls_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluice-rl/sluice/httpfront"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/rls"
)

// fixedDecider answers every request with one decision of one policy, so
// that both doors see the very same state: only door logic is under test.
type fixedDecider struct {
	p *limit.Policy
	r limit.Result
}

func (d fixedDecider) Decide(_ context.Context, reqs []limit.Request, out []limit.Result) {
	for i := range reqs {
		reqs[i].Policy, out[i] = d.p, d.r
	}
}

func (d fixedDecider) MTake(ctx context.Context, reqs []limit.Request, out []limit.Result) (bool, error) {
	d.Decide(ctx, reqs, out)
	return d.r.Allowed, nil
}

// The HTTP door's GET /v1/check and the gRPC door (Config.Headers) write
// the same RateLimit and Retry-After for the same decision: t is the time
// until a refused request can pass, which Retry-After also says, else the
// time until full; and the HTTP door's X-RateLimit-Reset is the gRPC
// door's duration_until_reset (what Envoy's x-ratelimit-reset shows),
// rounded up.
func TestRateLimitHeaderSameInBothDoors(t *testing.T) {
	p := &limit.Policy{Name: "api", Match: "api*", Limit: 10, Rate: 1, Period: time.Second, OnStoreError: limit.FailClosed}
	tests := []struct {
		name          string
		r             limit.Result
		rateLimit     string
		retry, xReset string // retry "": none
	}{
		{"refused, a retry passes in 1.5 s", limit.Result{Limit: 10, Remaining: 0, RetryAfterMs: 1500, ResetAfterMs: 9200},
			`"api";r=0;t=2`, "2", "10"},
		{"refused, cost over what is left", limit.Result{Limit: 10, Remaining: 2, RetryAfterMs: 800, ResetAfterMs: 7800},
			`"api";r=2;t=1`, "1", "8"},
		{"refused for ever: cost over the limit", limit.Result{Limit: 10, Remaining: 7, RetryAfterMs: -1, ResetAfterMs: 2500},
			`"api";r=7;t=3`, "", "3"},
		{"admitted", limit.Result{Allowed: true, Limit: 10, Remaining: 4, RetryAfterMs: -1, ResetAfterMs: 6000},
			`"api";r=4;t=6`, "", "6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.r.DecidedBy = limit.ByStore
			dec := fixedDecider{p: p, r: tt.r}

			hsrv, err := httpfront.New(httpfront.Config{Decider: dec})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			hsrv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/check?key=api:k&legacy=1", nil))
			hh := rec.Result().Header

			door := startDoor(t, nil, rls.Config{Decider: dec, Matcher: rls.PolicyMatcher(func(string) *limit.Policy { return p }), Headers: true})
			resp := call(t, door, req("edge", 0, desc("k", "v")))
			gh := http.Header{}
			for _, h := range resp.ResponseHeadersToAdd {
				gh.Add(h.Key, h.Value)
			}
			reset := resp.Statuses[0].GetDurationUntilReset().AsDuration()

			for _, h := range []string{"RateLimit-Policy", "RateLimit", "Retry-After"} {
				if got, want := gh.Values(h), hh.Values(h); len(got) != len(want) || len(got) > 0 && got[0] != want[0] {
					t.Errorf("%s: gRPC door %q, HTTP door %q", h, got, want)
				}
			}
			if got := hh.Get("RateLimit"); got != tt.rateLimit {
				t.Errorf("RateLimit %q, want %q", got, tt.rateLimit)
			}
			if got := hh.Get("Retry-After"); got != tt.retry {
				t.Errorf("Retry-After %q, want %q", got, tt.retry)
			}
			xReset := strconv.FormatInt((reset.Milliseconds()+999)/1000, 10)
			if got := hh.Get("X-RateLimit-Reset"); got != tt.xReset || xReset != tt.xReset {
				t.Errorf("X-RateLimit-Reset %q, duration_until_reset %v (%s s); want %s", got, reset, xReset, tt.xReset)
			}
			if code := resp.OverallCode; (code == rlsv3.RateLimitResponse_OK) != tt.r.Allowed {
				t.Errorf("overall %s for allowed %v", code, tt.r.Allowed)
			}
		})
	}
}
