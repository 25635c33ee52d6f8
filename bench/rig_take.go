package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/limit"
)

// The bucket of the seed lab's experiments: capacity 100, refill 50/s.
const (
	DefaultLabLimit = 100
	DefaultLabRate  = 50 // per second
)

// labBudget is what one bucket of limit tokens refilled at rate per second
// admits in elapsed when it starts full: limit + rate × elapsed.
func labBudget(limit, rate int64, elapsed time.Duration) float64 {
	return float64(limit) + float64(rate)*elapsed.Seconds()
}

// sluiceVersion asks a sluice process for its version; "unknown" if it
// does not say.
func sluiceVersion(ctx context.Context, c *redis.Client) string {
	if info, err := c.Do(ctx, "INFO", "server").Text(); err == nil {
		if v := infoFields(info)["sluice_version"]; v != "" {
			return v
		}
	}
	return "unknown"
}

// redisVersion asks the cluster for redis_version; "unknown" if it does
// not answer.
func redisVersion(ctx context.Context, seeds []string) string {
	if len(seeds) == 0 {
		return "none"
	}
	c := redis.NewClient(&redis.Options{Addr: seeds[0], MaxRetries: -1, DisableIdentity: true})
	defer c.Close()
	if info, err := c.Info(ctx, "server").Result(); err == nil {
		if v := infoFields(info)["redis_version"]; v != "" {
			return v
		}
	}
	return "unknown"
}

// takeOnce sends one RL.TAKE key 1 and returns the reply.
func takeOnce(ctx context.Context, c *redis.Client, key string) ([]any, error) {
	v, err := c.Do(ctx, "RL.TAKE", key, 1).Slice()
	if err == nil {
		err = checkTake(v)
	}
	if err != nil {
		return nil, fmt.Errorf("RL.TAKE %s: %w", key, err)
	}
	return v, nil
}

// mustStore takes one token of key through c and fails unless the store
// decided it: the experiment starts from strict decisions.
func mustStore(ctx context.Context, c *redis.Client, key string) error {
	v, err := takeOnce(ctx, c, key)
	if err != nil {
		return err
	}
	if v[5] != limit.ByStore {
		return fmt.Errorf("RL.TAKE %s = %v before the fault: want decided_by %s", key, v, limit.ByStore)
	}
	return nil
}

// waitStore sends RL.TAKE key through c every 5 ms until the store decides
// it, and returns when that reply came. An error reply or within passing
// ends it with an error.
func waitStore(ctx context.Context, c *redis.Client, key string, within time.Duration) (time.Time, error) {
	var at time.Time
	var last []any
	err := poll(ctx, 5*time.Millisecond, within, func() (bool, error) {
		v, err := takeOnce(ctx, c, key)
		at, last = time.Now(), v
		return err == nil && v[5] == limit.ByStore, err
	})
	if errors.Is(err, errNotYet) {
		err = fmt.Errorf("%s: no strict decision within %v: %v", key, within, last)
	}
	return at, err
}

// maxDuration is the largest of d, 0 when empty.
func maxDuration(d []time.Duration) time.Duration {
	var m time.Duration
	for _, x := range d {
		m = max(m, x)
	}
	return m
}
