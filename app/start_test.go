package app

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
)

// startApp builds the App of cfg and starts it, shut down at cleanup; it
// returns the App, the context Start runs under (ended at cleanup) and a
// RESP client of it, closed at cleanup.
func startApp(t *testing.T, cfg Config) (*App, context.Context, *redis.Client) {
	t.Helper()
	a, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := a.Start(ctx); err != nil {
		cancel()
		a.Close()
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: a.Addr().String()})
	t.Cleanup(func() {
		_ = c.Close()
		cancel()
		if err := a.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return a, ctx, c
}

// onePolicy is a config of one catch-all policy, p, of limit policyLimit
// refilled 1 per hour, closed on a store error.
func onePolicy(policyLimit int) string {
	return fmt.Sprintf("policies:\n  - name: p\n    match: \"*\"\n    limit: %d\n    rate: 1\n    period: 1h\n    on_store_error: closed\n", policyLimit)
}
