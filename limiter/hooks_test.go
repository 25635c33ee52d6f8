package limiter

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// OnDecision hears every final decision with its policy, the failure
// policy's included; OnError hears every error reply.
func TestHooks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		store  limit.Store
		mode   limit.FailMode
		wantBy string
	}{
		{"store", local.New(local.Config{DecidedBy: limit.ByStore}), limit.FailClosed, limit.ByStore},
		{"down", downStore{&limit.UnavailableError{Err: context.DeadlineExceeded}}, limit.FailOpen, limit.ByFallbackOpen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			got := map[string]int{}
			var errs []error
			var errPolicies []*limit.Policy
			fronts := map[string]int{}
			l, err := New(Config{Policies: policyFor(tc.mode, 1), Store: tc.store,
				OnDecision: func(front string, p *limit.Policy, r *limit.Result) {
					mu.Lock()
					defer mu.Unlock()
					fronts[front]++
					if r.Err != nil {
						t.Errorf("OnDecision with an error: %v", r.Err)
					}
					got[p.Name+" "+r.DecidedBy+" "+result(r.Allowed)]++
				},
				OnError: func(front string, p *limit.Policy, err error) {
					mu.Lock()
					defer mu.Unlock()
					errs = append(errs, err)
					errPolicies = append(errPolicies, p)
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			take(t, l, "k", "nomatch", "k")
			if _, err := l.MTake(context.Background(), []limit.Request{{Key: "nomatch", Cost: 1}}, make([]limit.Result, 1)); err == nil {
				t.Fatal("MTake of a key no policy matches: no error")
			}
			l.Decide(limit.WithFront(context.Background(), "grpc"), []limit.Request{{Key: "k", Cost: 1}}, make([]limit.Result, 1))
			if fronts["resp"] != 2 || fronts["grpc"] != 1 {
				t.Errorf("OnDecision heard fronts %v, want resp 2 (the default) and grpc 1 (WithFront)", fronts)
			}
			got["p "+tc.wantBy+" allowed"]-- // the grpc one
			want := "p " + tc.wantBy + " allowed"
			if got[want] != 2 || len(got) != 1 {
				t.Errorf("OnDecision heard %v, want 2 of %q", got, want)
			}
			if len(errs) != 2 || !errors.Is(errs[0], limit.ErrNoPolicy) || !errors.Is(errs[1], limit.ErrNoPolicy) {
				t.Errorf("OnError heard %v, want two no-policy errors", errs)
			}
			if len(errPolicies) != 2 || errPolicies[0] != nil || errPolicies[1] != nil {
				t.Errorf("OnError heard policies %v, want nil twice (no policy matched)", errPolicies)
			}
		})
	}
}

func result(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "rejected"
}
