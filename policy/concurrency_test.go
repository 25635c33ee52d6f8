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
	if _, err := policy.Parse([]byte(y), "c.yaml"); err == nil || !strings.Contains(err.Error(), "limit: must be from 1 to 1000000 slots") {
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

// A concurrency policy writes its own period (a slot's default TTL):
// without one it is a config error naming the file, the policy and the
// field, defaults.period is not inherited by it, and defaults.rate (which
// does not apply to slots) is neither inherited nor blamed on it. RL.POLICY
// SET's JSON follows the same rules.
func TestConcurrencyPeriodRequired(t *testing.T) {
	t.Parallel()
	const jobs = `{name: jobs, match: "jobs:*", algorithm: concurrency, limit: 5, on_store_error: local`
	for _, c := range []struct {
		name, yaml string
		want       string // "" : accepted
		period     time.Duration
	}{
		{"no period", "policies:\n  - " + jobs + "}\n", `c.yaml:2: policy #1 "jobs": period: required`, 0},
		{"defaults.period is not inherited", "defaults: {period: 1m}\npolicies:\n  - " + jobs + "}\n", `c.yaml:3: policy #1 "jobs": period: required`, 0},
		{"defaults.rate does not apply", "defaults: {rate: 10, period: 1m}\npolicies:\n  - " + jobs + ", period: 2h}\n  - {name: api, match: \"*\", limit: 10, on_store_error: closed}\n", "", 2 * time.Hour},
		{"its own period", "defaults: {period: 1m}\npolicies:\n  - " + jobs + ", period: 30s}\n", "", 30 * time.Second},
		{"defaults.algorithm concurrency", "defaults: {algorithm: concurrency, period: 1m, rate: 3}\npolicies:\n  - {name: jobs, match: \"jobs:*\", limit: 5, on_store_error: local}\n", `c.yaml:3: policy #1 "jobs": period: required`, 0},
	} {
		s, err := policy.Parse([]byte(c.yaml), "c.yaml")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", c.name, err)
		case c.want == "" && s.Policies[0].Period != c.period:
			t.Errorf("%s: period %s, want %s", c.name, s.Policies[0].Period, c.period)
		case c.want == "" && len(s.Policies) > 1 && (s.Policies[1].Rate != 10 || s.Policies[1].Period != time.Minute):
			t.Errorf("%s: the rate policy got rate %d period %s, want defaults' 10 and 1m", c.name, s.Policies[1].Rate, s.Policies[1].Period)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		case c.want != "" && strings.Contains(err.Error(), "rate"):
			t.Errorf("%s: error %v blames a rate the policy never wrote", c.name, err)
		}
	}
	_, err := policy.ParsePolicyJSON("j", []byte(`{"match":"j:*","algorithm":"concurrency","limit":3,"on_store_error":"closed"}`))
	if err == nil || !strings.Contains(err.Error(), `policy "j": period: required`) {
		t.Errorf("JSON without period: %v, want period required", err)
	}
}

// A limit of more slots than a key may hold is reported under limit.
func TestConcurrencyLimitField(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"1000001", "2000000"} {
		y := "policies:\n  - {name: jobs, match: \"jobs:*\", algorithm: concurrency, limit: " + n + ", period: 30s, on_store_error: local}\n"
		_, err := policy.Parse([]byte(y), "c.yaml")
		if err == nil || !strings.Contains(err.Error(), `policy #1 "jobs": limit: `) || strings.Contains(err.Error(), "period") {
			t.Errorf("limit %s: error %v, want it under limit", n, err)
		}
	}
	y := "policies:\n  - {name: jobs, match: \"jobs:*\", algorithm: concurrency, limit: 1000000, period: 30s, on_store_error: local}\n"
	if _, err := policy.Parse([]byte(y), "c.yaml"); err != nil {
		t.Errorf("limit 1000000: %v", err)
	}
}

// max_ttl caps RL.ACQUIRE's ttl_ms per concurrency policy: a duration of
// whole ms up to 24h, at least the policy's period, only with algorithm
// concurrency, not in defaults; RL.POLICY SET's JSON reads and writes it.
func TestConcurrencyMaxTTL(t *testing.T) {
	t.Parallel()
	const head = "policies:\n  - {name: jobs, match: \"jobs:*\", algorithm: concurrency, limit: 5, period: 30s, on_store_error: local"
	s, err := policy.Parse([]byte(head+", max_ttl: 1h}\n"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := policy.Describe(s.Policies[0]), "max_ttl=1h"; !strings.Contains(got, want) {
		t.Errorf("Describe: %s, want %s", got, want)
	}
	j := policy.PolicyJSON(s.Policies[0])
	if !strings.Contains(j, `"max_ttl":"1h"`) {
		t.Errorf("PolicyJSON: %s, want max_ttl 1h", j)
	}
	back, err := policy.ParsePolicyJSON("jobs", []byte(j))
	if err != nil || policy.PolicyJSON(back) != j {
		t.Errorf("round trip: %v %v", back, err)
	}
	if j := policy.PolicyJSON(policy.Default().Policies[0]); strings.Contains(j, "max_ttl") {
		t.Errorf("a policy without max_ttl writes one: %s", j)
	}
	for _, c := range []struct{ yaml, want string }{
		{head + ", max_ttl: 10s}\n", `c.yaml:2: policy #1 "jobs": max_ttl: must be at least the period (30s)`},
		{head + ", max_ttl: 48h}\n", `policy #1 "jobs": max_ttl: must be a whole number of milliseconds from 1ms to 24h`},
		{head + ", max_ttl: 1500us}\n", `policy #1 "jobs": max_ttl: must be a whole number of milliseconds`},
		{head + ", max_ttl: 0}\n", `policy #1 "jobs": max_ttl: must be a whole number of milliseconds`},
		{head + ", max_ttl: 5}\n", `policy #1 "jobs": max_ttl: needs a unit`},
		{"policies:\n  - {name: api, match: \"*\", limit: 5, rate: 5, on_store_error: local, max_ttl: 1h}\n", `policy #1 "api": max_ttl: only with algorithm concurrency`},
		{"defaults: {max_ttl: 1h}\n" + head + "}\n", `defaults: max_ttl: not allowed in defaults`},
	} {
		if _, err := policy.Parse([]byte(c.yaml), "c.yaml"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.yaml, err, c.want)
		}
	}
	if _, err := policy.ParsePolicyJSON("j", []byte(`{"match":"j:*","algorithm":"concurrency","limit":3,"period":"1m","max_ttl":"10s","on_store_error":"closed"}`)); err == nil || !strings.Contains(err.Error(), "max_ttl: must be at least the period") {
		t.Errorf("JSON max_ttl below period: %v", err)
	}
}

// NewSet checks max_ttl as Parse does.
func TestConcurrencyMaxTTLNewSet(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		max  time.Duration
		want string
	}{
		{1500 * time.Microsecond, "max_ttl: must be a whole number of milliseconds"},
		{48 * time.Hour, "max_ttl: must be a whole number of milliseconds from 1ms to 24h"},
		{time.Second, "max_ttl: must be at least the period (30s)"},
		{time.Hour, ""},
	} {
		p := &limit.Policy{Name: "jobs", Match: "*", Algorithm: limit.Concurrency, Limit: 2, Period: 30 * time.Second, MaxTTL: c.max, OnStoreError: limit.FailClosed}
		_, err := policy.NewSet(0, p)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("max_ttl %s: %v, want %q", c.max, err, c.want)
		}
	}
}
