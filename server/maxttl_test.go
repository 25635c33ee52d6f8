package server

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/local"
	"github.com/sluice-rl/sluice/policy"
)

// A concurrency policy's max_ttl caps RL.ACQUIRE's ttl_ms: a longer one is
// an error naming the policy and its cap, and holds nothing; the cap itself
// and no ttl_ms (the period) are taken.
func TestAcquireMaxTTL(t *testing.T) {
	t.Parallel()
	set, err := policy.Parse([]byte("policies:\n  - {name: jobs, match: \"jobs:*\", algorithm: concurrency, limit: 1, period: 30s, max_ttl: 1h, on_store_error: closed}\n"), "jobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limiter.New(limiter.Config{Policies: set, Store: local.New(local.Config{Now: func() time.Time { return time.Unix(1_700_000_000, 0) }})})
	if err != nil {
		t.Fatal(err)
	}
	_, addr := start(t, Config{Decider: lim})
	rc := dialRaw(t, addr)
	for _, tc := range []struct{ in, want string }{
		{"RL.ACQUIRE jobs:a 3600001", "-ERR ttl_ms 3600001 is above max_ttl 1h0m0s (3600000 ms) of concurrency policy 'jobs'"},
		{"RL.ACQUIRE jobs:a 86400000", "-ERR ttl_ms 86400000 is above max_ttl 1h0m0s (3600000 ms) of concurrency policy 'jobs'"},
		{"RL.ACQUIRE jobs:a 3600000", "[:1 :1 :0 :-1 :3600000 $embedded $"}, // nothing held by the refused ones
		{"RL.ACQUIRE jobs:b", "[:1 :1 :0 :-1 :30000 $embedded $"},
	} {
		rc.send(tc.in + "\r\n")
		if got := rc.readReply(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: got %s, want %s…", tc.in, got, tc.want)
		}
	}
}
