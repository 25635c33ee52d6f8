package policy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/policy"
)

// algorithm: concurrency takes limit and period; rate, a hot block and
// scope: global are refused with the field named.
func TestConcurrencyPolicies(t *testing.T) {
	t.Parallel()
	ok := "policies:\n  - {name: jobs, match: \"jobs:*\", algorithm: concurrency, limit: 5, period: 30s, on_store_error: local}\n"
	s, err := policy.Parse([]byte(ok), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Policies[0]; p.Algorithm != limit.Concurrency || p.Limit != 5 || p.Period != 30*time.Second || p.Rate != 0 {
		t.Fatalf("got %+v", *p)
	}
	for _, c := range []struct{ extra, want string }{
		{"rate: 3", "rate: must not be given with algorithm concurrency"},
		{"hot: {mode: lease, threshold: 10}", "hot.mode: lease needs a bucket algorithm"},
		{"hot: {mode: split, threshold: 10, split: 4}", "hot.mode: split needs a bucket algorithm"},
		{"scope: global", "scope: global needs a bucket algorithm"},
		{"period: 500us", "period: period (a slot's TTL) must be a whole number of milliseconds"},
		{"period: 48h", "from 1ms to 24h"},
	} {
		y := "policies:\n  - {name: jobs, match: \"jobs:*\", algorithm: concurrency, limit: 5, on_store_error: local, " + c.extra + "}\n"
		_, err := policy.Parse([]byte(y), "c.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `"jobs"`) {
			t.Errorf("%s: error %v, want %q naming the policy", c.extra, err, c.want)
		}
	}
	y := "policies:\n  - {name: jobs, match: \"jobs:*\", algorithm: concurrency, limit: 2000000, on_store_error: local}\n"
	if _, err := policy.Parse([]byte(y), "c.yaml"); err == nil || !strings.Contains(err.Error(), "limit must be from 1 to 1000000 slots") {
		t.Errorf("limit 2000000: %v", err)
	}
}

// RL.POLICY SET's JSON accepts the algorithm, and refuses a rate with it.
func TestConcurrencyPolicyJSON(t *testing.T) {
	t.Parallel()
	p, err := policy.ParsePolicyJSON("j", []byte(`{"match":"j:*","algorithm":"concurrency","limit":3,"period":"10s","on_store_error":"closed"}`))
	if err != nil || p.Algorithm != limit.Concurrency || p.Limit != 3 || p.Period != 10*time.Second {
		t.Fatalf("got %+v, %v", p, err)
	}
	back, err := policy.ParsePolicyJSON("j", []byte(policy.PolicyJSON(p)))
	if err != nil || back.Algorithm != limit.Concurrency || back.Rate != 0 {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	if _, err := policy.ParsePolicyJSON("j", []byte(`{"match":"j:*","algorithm":"concurrency","limit":3,"rate":1,"on_store_error":"closed"}`)); err == nil {
		t.Fatal("a rate with concurrency was accepted")
	}
}
