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
	for _, tc := range policyCalls(p) {
		ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := tc.do(ctx)
		cancel()
		if !errors.Is(err, limit.ErrUnavailable) {
			t.Errorf("%s with the policies' node frozen: got %v, want an error that is limit.ErrUnavailable", tc.name, err)
		}
	}
}

// TestPoliciesRedirectLoop: while two primaries disagree on who owns the
// runtime policies' slot (a slot move between its steps, a promotion not
// yet seen by every node), each sends a request to the other until the
// client's redirections run out. RL.POLICY must then answer "store
// unavailable" (send it again), not the last MOVED the client was given
// (the nemesis of issue 29 saw "ERR MOVED 9504 10.79.159.22:6384").
func TestPoliciesRedirectLoop(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{Replicas: -1})
	s := newStore(t, c.Addrs())
	p := s.Policies()
	ctx := context.Background()
	if _, err := p.Load(ctx); err != nil {
		t.Fatalf("Load before: %v", err)
	}
	owner, err := c.PrimaryForKey(ctx, PoliciesKey)
	if err != nil {
		t.Fatal(err)
	}
	var other *localredis.Node
	for _, n := range c.Primaries() {
		if n != owner {
			other = n
			break
		}
	}
	ownerID, err := owner.Client().ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	otherID, err := other.Client().ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	slot := localredis.Slot(PoliciesKey)
	// The owner alone is told the other owns the slot (it holds no key of
	// it yet: no policy was stored); the other still names the owner:
	// MOVED back and forth.
	if err := owner.Client().Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", otherID).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Client().Do(context.Background(), "CLUSTER", "SETSLOT", slot, "NODE", ownerID).Err() })
	for _, tc := range policyCalls(p) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := tc.do(ctx)
		cancel()
		if !errors.Is(err, limit.ErrUnavailable) {
			t.Errorf("%s while the slot's owners disagree: got %v, want an error that is limit.ErrUnavailable", tc.name, err)
		}
	}
}

// policyCalls are RL.POLICY's three calls on the backend: put, delete, load.
func policyCalls(p *Policies) []struct {
	name string
	do   func(context.Context) error
} {
	return []struct {
		name string
		do   func(context.Context) error
	}{
		{"put", func(ctx context.Context) error {
			return p.Put(ctx, "api", `{"match": "api:*", "limit": 6, "rate": 6, "period": "1s"}`)
		}},
		{"delete", func(ctx context.Context) error { _, err := p.Delete(ctx, "api"); return err }},
		{"load", func(ctx context.Context) error { _, err := p.Load(ctx); return err }},
	}
}
