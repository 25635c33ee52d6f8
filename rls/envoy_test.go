package rls_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluice-rl/sluice/envoycfg"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/rls"
)

// The door on envoyproxy/ratelimit's own config (README examples 3 and 7,
// from envoycfg's testdata): a blacklisted address (requests_per_unit: 0)
// is over the limit and, all-or-nothing, spends nothing on the others;
// a rule that replaces another in the same request is the only one that
// applies; quota_mode rules refuse a request only when all of them do.
func TestDoorWithEnvoyConfig(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"example03.yaml", "example07.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "envoycfg", "testdata", "readme", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "example03.yaml" {
			// 10 an hour, not a second: a token refilled between two calls
			// (100 ms on a loaded machine) would change the remaining counts
			// the checks below read, and nothing here is about refill.
			b = bytes.ReplaceAll(b, []byte("unit: second"), []byte("unit: hour"))
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// quota_mode, as in ratelimit's own examples/ratelimit/config.
	quota := `domain: quota
descriptors:
  - {key: service, value: s1, quota_mode: true, rate_limit: {unit: hour, requests_per_unit: 1}}
  - {key: service, value: s2, quota_mode: true, rate_limit: {unit: hour, requests_per_unit: 1}}
  - {key: service, value: s3, quota_mode: true, rate_limit: {unit: hour, requests_per_unit: 5}}
  - {key: service, value: s4, quota_mode: true, rate_limit: {unit: hour, requests_per_unit: 2}}
  - {key: user, rate_limit: {unit: hour, requests_per_unit: 10}}
`
	if err := os.WriteFile(filepath.Join(dir, "quota.yaml"), []byte(quota), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := envoycfg.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := redistest.NewCluster(t, localredis.Config{Replicas: -1})
	door := startDoor(t, newLimiter(t, c), rls.Config{Matcher: envoycfg.NewHolder(cfg)})
	over := rlsv3.RateLimitResponse_OVER_LIMIT
	ip := "10.1.2.3"

	resp := call(t, door, req("edge_proxy_per_ip", 0, desc("remote_address", ip)))
	check(t, "an address", resp, ok, want{ok, 9})
	resp = call(t, door, req("edge_proxy_per_ip", 0, desc("remote_address", ip), desc("remote_address", "50.0.0.5")))
	check(t, "with the blacklisted one", resp, over, want{ok, 9}, want{over, 0})
	resp = call(t, door, req("edge_proxy_per_ip", 0, desc("remote_address", ip)))
	check(t, "the address again: nothing was spent by the refused call", resp, ok, want{ok, 8})

	s1, s2, s3, user := desc("service", "s1"), desc("service", "s2"), desc("service", "s3"), desc("user", "u")
	resp = call(t, door, req("quota", 0, s1, s2, user))
	check(t, "quota: both quotas admit", resp, ok, want{ok, 0}, want{ok, 0}, want{ok, 9})
	resp = call(t, door, req("quota", 0, s1, s2, user))
	check(t, "quota: every quota refuses, so the request is over and the user rule spends nothing", resp, over, want{over, 0}, want{over, 0}, want{ok, 9})
	resp = call(t, door, req("quota", 0, s1, s3, user))
	check(t, "quota: one of two quotas admits, so the request is OK", resp, ok, want{over, 0}, want{ok, 4}, want{ok, 8})

	// hits_addend 0 checks a quota_mode rule as any other: it spends nothing.
	s4 := func(n uint64) *rlsv3.RateLimitRequest { return req("quota", 0, hits(desc("service", "s4"), n)) }
	for i := range 3 {
		check(t, fmt.Sprintf("quota: check %d of s4", i+1), call(t, door, s4(0)), ok, want{ok, 2})
	}
	check(t, "quota: s4 after three checks takes its first", call(t, door, s4(1)), ok, want{ok, 1})
	check(t, "quota: s4 takes its second", call(t, door, s4(1)), ok, want{ok, 0})
	check(t, "quota: a check of the spent s4 is over", call(t, door, s4(0)), over, want{over, 0})
	check(t, "quota: a check of s4 with an admitting quota is OK", call(t, door, req("quota", 0, hits(desc("service", "s4"), 0), s3)), ok, want{over, 0}, want{ok, 3})

	resp = call(t, door, req("example7", 0, desc("key_1", "value_1", "user", "bkthomps"), desc("key_2", "value_2", "user", "bkthomps")))
	check(t, "replaces", resp, ok, want{ok, 0}, want{ok, 9})
	if resp.Statuses[0].CurrentLimit != nil || resp.Statuses[1].GetCurrentLimit().GetRequestsPerUnit() != 10 {
		t.Errorf("replaces: current limits %v and %v; want none (replaced) and 10", resp.Statuses[0].CurrentLimit, resp.Statuses[1].CurrentLimit)
	}
}
