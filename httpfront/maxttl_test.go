package httpfront

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/local"
	"github.com/sluice-rl/sluice/policy"
)

// POST /v1/acquire with a ttl_ms over the policy's max_ttl is a 400 that
// names the cap, and holds nothing.
func TestAcquireMaxTTL(t *testing.T) {
	t.Parallel()
	set, err := policy.Parse([]byte("policies:\n  - {name: jobs, match: \"jobs:*\", algorithm: concurrency, limit: 1, period: 30s, max_ttl: 1h, on_store_error: closed}\n"), "jobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l, err := limiter.New(limiter.Config{Policies: set, Store: local.New(local.Config{Now: func() time.Time { return t0 }})})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, Config{Decider: l})
	resp := do(t, s, "POST", "/v1/acquire", `{"key":"jobs:a","ttl_ms":3600001}`)
	var e struct{ Error string }
	decode(t, resp, &e)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Error, "above max_ttl 1h0m0s (3600000 ms) of concurrency policy 'jobs'") {
		t.Fatalf("over max_ttl: %d %q, want 400 naming the cap", resp.StatusCode, e.Error)
	}
	var a acquireBody
	decode(t, do(t, s, "POST", "/v1/acquire", `{"key":"jobs:a","ttl_ms":3600000}`), &a)
	if !a.Allowed || a.Remaining != 0 || a.ResetAfterMs != 3_600_000 {
		t.Fatalf("at max_ttl: %+v, want the one slot", a)
	}
}
