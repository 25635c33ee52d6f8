package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// TestPoliciesStoreUnavailable: RL.POLICY SET and DEL (Policies.Put and
// Delete) and the policies' load, when the node holding the runtime
// policies cannot answer, fail with limit.ErrUnavailable, as RL.RESET
// does: the reply says "store unavailable" (the change may or may not
// have been made; send it again), not the client's "context deadline
// exceeded" or "CLUSTERDOWN" (the nemesis of issue 29 found both).
func TestPoliciesStoreUnavailable(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{Replicas: -1})
	s := newStore(t, c.Addrs())
	p := s.Policies()
	ctx := context.Background()
	if err := p.Put(ctx, "api", `{"match": "api:*", "limit": 5, "rate": 5, "period": "1s"}`); err != nil {
		t.Fatalf("Put before the freeze: %v", err)
	}
	owner, err := c.PrimaryForKey(ctx, PoliciesKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Resume() })
	for _, tc := range []struct {
		name string
		do   func(context.Context) error
	}{
		{"put", func(ctx context.Context) error {
			return p.Put(ctx, "api", `{"match": "api:*", "limit": 6, "rate": 6, "period": "1s"}`)
		}},
		{"delete", func(ctx context.Context) error { _, err := p.Delete(ctx, "api"); return err }},
		{"load", func(ctx context.Context) error { _, err := p.Load(ctx); return err }},
	} {
		ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := tc.do(ctx)
		cancel()
		if !errors.Is(err, limit.ErrUnavailable) {
			t.Errorf("%s with the policies' node frozen: got %v, want an error that is limit.ErrUnavailable", tc.name, err)
		}
	}
}
