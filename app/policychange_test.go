package app

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// TestPolicyChangeClearsDenyCache: every way the policies in force change
// (SIGHUP's Reload, the config watch, RL.POLICY SET and DEL) runs the
// holder's change hook, which empties the deny cache and drops leased
// tokens; a policy lookup clears nothing. A refusal cached under a policy
// that comes back with its pointer (RL.POLICY DEL brings the file's back)
// would otherwise refuse what the store admits under the policy in force
// meanwhile (docs/hotkeys.md, "The deny cache"). Embedded store: the
// limiter does not read the cache there, so the test fills it itself.
func TestPolicyChangeClearsDenyCache(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	write := func(policyLimit int) { writeFile(t, file, onePolicy(policyLimit)) }
	write(2)
	cfg := Defaults()
	cfg.Listen, cfg.Admin, cfg.PolicyFile, cfg.WatchConfig = "127.0.0.1:0", "", file, true
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, ctx, c := startApp(t, cfg)

	// refuse caches a refusal of key under the policy in force, as the
	// limiter does after the store's.
	refuse := func(key string) {
		p := a.holder.Current().Match(key)
		a.deny.Refused(key, p, 1, &limit.Result{Limit: p.Limit, RetryAfterMs: 60_000}, time.Now(), a.deny.Gen())
		if a.deny.Stats().Entries != 1 {
			t.Fatalf("the refusal of %s was not cached", key)
		}
		if _, ok := a.deny.Lookup(key, a.holder.Current().Match(key), 1, time.Now()); !ok {
			t.Fatalf("the refusal of %s is not answered", key)
		}
	}
	for _, step := range []struct {
		name   string
		change func() error
	}{
		{"SIGHUP", func() error { write(3); return a.Reload() }},
		{"RL.POLICY SET", func() error {
			return c.Do(ctx, "RL.POLICY", "SET", "p", `{"match": "*", "limit": 50, "rate": 1, "period": "1h", "on_store_error": "closed"}`).Err()
		}},
		{"RL.POLICY DEL (the file's p back, its pointer too)", func() error { return c.Do(ctx, "RL.POLICY", "DEL", "p").Err() }},
		{"config watch", func() error {
			before := a.holder.Current()
			write(4)
			deadline := time.Now().Add(10 * time.Second)
			for a.holder.Current() == before {
				if time.Now().After(deadline) {
					return fmt.Errorf("the watch did not reload %s in 10s", file)
				}
				time.Sleep(10 * time.Millisecond)
			}
			return nil
		}},
	} {
		refuse("k")
		if err := step.change(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if n := a.deny.Stats().Entries; n != 0 {
			t.Fatalf("after %s: %d refusals cached under the old policies", step.name, n)
		}
	}
	// A lookup of the policies in force, with no change, clears nothing.
	refuse("k")
	if _, err := c.Do(ctx, "RL.TAKE", "k").Slice(); err != nil {
		t.Fatal(err)
	}
	if a.deny.Stats().Entries != 1 {
		t.Fatal("a request with no policy change emptied the deny cache")
	}
}
