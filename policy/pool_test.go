package policy

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/limit"
)

// limit.Pool is internal, built only by the region layer: a config, an
// RL.POLICY SET and a Go caller of NewSet cannot name it.
func TestPoolIsRefused(t *testing.T) {
	t.Parallel()
	const want = `algorithm: unknown algorithm "pool", want token_bucket | gcra | sliding_window | fixed_window | concurrency`
	yaml := "defaults: {on_store_error: open}\npolicies:\n  - {name: p, match: x, algorithm: pool, limit: 5, rate: 5, period: 1s}\n"
	if s, err := Parse([]byte(yaml), "sluice.yaml"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("YAML: Parse = %v, %v; want an error with %q", s, err, want)
	}
	json := `{"match": "x", "algorithm": "pool", "limit": 5, "rate": 5, "on_store_error": "open"}`
	if p, err := ParsePolicyJSON("p", []byte(json)); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("JSON: ParsePolicyJSON = %+v, %v; want an error with %q", p, err, want)
	}
	p := &limit.Policy{Name: "p", Match: "x", Algorithm: limit.Pool, Limit: 5, Rate: 5, OnStoreError: limit.FailOpen}
	if s, err := NewSet(0, p); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("NewSet = %v, %v; want an error with %q", s, err, want)
	}
}
