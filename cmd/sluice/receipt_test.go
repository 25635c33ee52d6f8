package main

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// receiptConfig: 100 tokens at 1 an hour, so that nothing refills while a
// test runs, and no hot-key path (every take is the store's).
const receiptConfig = `defaults:
  on_store_error: closed
policies:
  - {name: llm, match: "llm:*", limit: 100, rate: 1, period: 1h, hot: {mode: off}}
  - {name: loop, match: "loop:*", limit: 10, rate: 1, period: 1h, hot: {mode: off}}
`

// receiptModes are the two stores the give-back rule is checked on: a real
// Redis Cluster behind the binary, and the embedded store.
func receiptModes(t *testing.T) map[string][]string {
	t.Helper()
	c := redistest.NewCluster(t, localredis.Config{})
	return map[string][]string{
		"cluster":  {"--cluster", strings.Join(c.Addrs(), ",")},
		"embedded": nil,
	}
}

// countAdmitted sends n RL.TAKE key cost and counts the admitted.
func countAdmitted(t *testing.T, c *redis.Client, key string, cost int64, n int) int {
	t.Helper()
	admitted := 0
	for range n {
		if mustTake(t, c, key, cost).Allowed {
			admitted++
		}
	}
	return admitted
}

// TestGiveBackWithoutReceipt is issue 28's hostile tenant: with
// --admin-pass set (RL.RESET is refused to a plain client), a client that
// never spent on a key gives back to it, and a client that takes and gives
// back in turn admits past its limit. Neither may move the key's limit: a
// negative RL.ADJUST without the receipt of a take on the key is an error
// and changes nothing.
func TestGiveBackWithoutReceipt(t *testing.T) {
	t.Parallel()
	for mode, store := range receiptModes(t) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--config", writeConfig(t, receiptConfig), "--admin-pass", "adm-Rc93"}, store...)
			p := startSluice(t, args...)
			owner, hostile := p.client(t), p.client(t)

			if r := mustTake(t, owner, "llm:victim", 100); !r.Allowed {
				t.Fatalf("the owner's take of 100: %+v", r)
			}
			if r := mustTake(t, owner, "llm:victim", 1); r.Allowed {
				t.Fatalf("a take past the limit: %+v", r)
			}
			if err := hostile.Do(t.Context(), "RL.RESET", "llm:victim").Err(); err == nil {
				t.Fatal("RL.RESET by a plain client was admitted")
			}
			err := hostile.Do(t.Context(), "RL.ADJUST", "llm:victim", "-9007199254740991").Err()
			after := countAdmitted(t, owner, "llm:victim", 1, 3)
			t.Logf("%s: give-back by a client that never spent: err %v; then %d of 3 takes admitted", mode, err, after)
			if err == nil || after != 0 {
				t.Errorf("%s: a foreign give-back: err %v, then %d of 3 takes admitted; want an error and 0", mode, err, after)
			}

			admitted := 0
			for range 100 {
				if mustTake(t, hostile, "loop:k", 10).Allowed {
					admitted += 10
				}
				_ = hostile.Do(t.Context(), "RL.ADJUST", "loop:k", "-10").Err()
			}
			t.Logf("%s: 100 rounds of TAKE 10 / ADJUST -10 (no receipt) admitted %d on a limit of 10", mode, admitted)
			if admitted != 10 {
				t.Errorf("%s: 100 rounds of TAKE 10 / ADJUST -10 admitted %d, want 10", mode, admitted)
			}
		})
	}
}
