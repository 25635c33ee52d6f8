package algotest

import (
	"testing"

	"github.com/sluice-rl/sluice/limit"
)

// Decide is one implementation under test: decide cost tokens of key under
// p at now (µs since the epoch).
type Decide func(t *testing.T, key string, p *limit.Policy, cost int64, op limit.Op, now int64) limit.Result

// Run runs every vector of table against decide, each on its own key.
func Run(t *testing.T, table []Vector, keyPrefix string, decide Decide) {
	t.Helper()
	for _, v := range table {
		t.Run(v.Name, func(t *testing.T) {
			key := keyPrefix + v.Name
			p := v.Policy
			for i, s := range v.Steps {
				if s.Policy != nil {
					p = s.Policy
				}
				op := s.Op
				if s.Peek {
					op = limit.OpPeek
				}
				got := decide(t, key, p, s.Cost, op, T0+s.At)
				if got.Err != nil {
					t.Fatalf("step %d: %v", i, got.Err)
				}
				w := s.Want
				if got.Allowed != w.Allowed || got.Remaining != w.Remaining ||
					got.RetryAfterMs != w.RetryAfter || got.ResetAfterMs != w.ResetAfter || got.Limit != p.Limit || got.Granted != w.Granted {
					t.Fatalf("step %d (at +%dµs cost %d peek %v): got allowed=%v limit=%d remaining=%d retry=%d reset=%d, want allowed=%v limit=%d remaining=%d retry=%d reset=%d",
						i, s.At, s.Cost, s.Peek, got.Allowed, got.Limit, got.Remaining, got.RetryAfterMs, got.ResetAfterMs,
						w.Allowed, p.Limit, w.Remaining, w.RetryAfter, w.ResetAfter)
				}
			}
		})
	}
}
