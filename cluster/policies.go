package cluster

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// PoliciesKey is the hash of runtime policies (RL.POLICY SET), name →
// JSON, and PoliciesChannel the Pub/Sub channel every change is announced
// on. No user key maps to them: the Redis key of a user key always holds a
// '{' (see Key).
const (
	PoliciesKey     = "sluice:policies"
	PoliciesChannel = "sluice:policies"
)

// Policies is the policy.Backend of a Store: the policies live in Redis, so
// every sluice instance in front of the cluster shares them.
type Policies struct{ s *Store }

// Policies returns the store's policy backend.
func (s *Store) Policies() *Policies { return &Policies{s} }

func (p *Policies) cmd() redis.UniversalClient {
	if p.s.cc != nil {
		return p.s.cc
	}
	return p.s.single
}

// Load reads every runtime policy.
func (p *Policies) Load(ctx context.Context) (map[string]string, error) {
	m, err := p.cmd().HGetAll(ctx, PoliciesKey).Result()
	return m, p.wrap(err)
}

// Put stores one policy and announces it.
func (p *Policies) Put(ctx context.Context, name, data string) error {
	if err := p.cmd().HSet(ctx, PoliciesKey, name, data).Err(); err != nil {
		return p.wrap(err)
	}
	return p.wrap(p.cmd().Publish(ctx, PoliciesChannel, name).Err())
}

// Delete removes one policy and announces it.
func (p *Policies) Delete(ctx context.Context, name string) (bool, error) {
	n, err := p.cmd().HDel(ctx, PoliciesKey, name).Result()
	if err != nil {
		return false, p.wrap(err)
	}
	return n > 0, p.wrap(p.cmd().Publish(ctx, PoliciesChannel, name).Err())
}

// wrap makes a connectivity failure limit.ErrUnavailable, as the store's
// decisions and resets do: RL.POLICY then answers "store unavailable" (the
// change may or may not have been made), not the client's own words. A
// MOVED or ASK the client is left with is one too: it has followed its
// redirections until they ran out, so the nodes disagree on the slot's
// owner (a slot move between its steps, a promotion not yet seen by
// all), a state between two that passes.
func (p *Policies) wrap(err error) error {
	if isConnectivity(err) || isRedirect(err) {
		return p.s.unavailable("", err)
	}
	return err
}

// isRedirect reports whether err is a MOVED or ASK reply.
func isRedirect(err error) bool {
	if err == nil {
		return false
	}
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	return moved || ask
}

// Watch calls changed for every announcement until ctx ends. go-redis
// resubscribes after a broken connection; what was said meanwhile is
// missed, which the caller's periodic check heals.
func (p *Policies) Watch(ctx context.Context, changed func()) {
	for ctx.Err() == nil {
		sub := p.cmd().Subscribe(ctx, PoliciesChannel)
		ch := sub.Channel(redis.WithChannelHealthCheckInterval(5 * time.Second))
	loop:
		for {
			select {
			case <-ctx.Done():
				break loop
			case _, ok := <-ch:
				if !ok {
					break loop
				}
				changed()
			}
		}
		_ = sub.Close()
		select { // a broken subscription is retried, not spun on
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
