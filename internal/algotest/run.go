package algotest

import (
	"testing"

	"github.com/sluice-rl/sluice/limit"
)

// Decide is one implementation under test: decide cost tokens of key under
// p at now (µs since the epoch).
type Decide func(t *testing.T, key string, p *limit.Policy, cost int64, op limit.Op, now int64) limit.Result

// TTL reads the TTL of key, in ms, just after a step at now (µs since
// the epoch): -2 when the key does not exist, as PTTL replies.
type TTL func(t *testing.T, key string, now int64) int64

// TTLSlack is how far below a step's TTL a runner's reading may be: a
// real Redis counts its TTLs down in real time, not on the vectors' clock.
const TTLSlack = 2000 // ms

// Run runs every vector of table against decide, each on its own key.
func Run(t *testing.T, table []Vector, keyPrefix string, decide Decide) {
	t.Helper()
	RunTTL(t, table, keyPrefix, decide, nil)
}

// DecideAt is Decide with sluice's clock apart from the store's: now is
// the store's, sluiceNow sluice's (Step.Sluice), both µs since the epoch.
type DecideAt func(t *testing.T, key string, p *limit.Policy, cost int64, op limit.Op, now, sluiceNow int64) limit.Result

// RunTTL is Run that also checks every step's TTL with ttl. A step with
// its own sluice clock (Step.Sluice) fails: it needs RunAt.
func RunTTL(t *testing.T, table []Vector, keyPrefix string, decide Decide, ttl TTL) {
	t.Helper()
	RunAt(t, table, keyPrefix, func(t *testing.T, key string, p *limit.Policy, cost int64, op limit.Op, now, sluiceNow int64) limit.Result {
		t.Helper()
		if sluiceNow != now {
			t.Fatalf("a step with sluice's clock %dµs from the store's needs RunAt", sluiceNow-now)
		}
		return decide(t, key, p, cost, op, now)
	}, ttl)
}

// RunAt is RunTTL for an implementation that takes both clocks.
func RunAt(t *testing.T, table []Vector, keyPrefix string, decide DecideAt, ttl TTL) {
	t.Helper()
	for _, v := range table {
		runSteps(t, keyPrefix, v.Name, v.Policy, v.Steps, func(t *testing.T, key string, p *limit.Policy, i int, s Step) {
			op := s.Op
			if s.Peek {
				op = limit.OpPeek
			}
			got := decide(t, key, p, s.Cost, op, T0+s.At, T0+s.At+s.Sluice)
			if got.Err != nil {
				t.Fatalf("step %d: %v", i, got.Err)
			}
			w := s.Want
			if got.Allowed != w.Allowed || got.Remaining != w.Remaining ||
				got.RetryAfterMs != w.RetryAfter || got.ResetAfterMs != w.ResetAfter || got.Limit != p.Limit || got.Granted != w.Granted {
				t.Fatalf("step %d (at +%dµs cost %d op %d): got allowed=%v limit=%d remaining=%d retry=%d reset=%d granted=%d, want allowed=%v limit=%d remaining=%d retry=%d reset=%d granted=%d",
					i, s.At, s.Cost, op, got.Allowed, got.Limit, got.Remaining, got.RetryAfterMs, got.ResetAfterMs, got.Granted,
					w.Allowed, p.Limit, w.Remaining, w.RetryAfter, w.ResetAfter, w.Granted)
			}
			if s.TTL == 0 || ttl == nil {
				return
			}
			left := ttl(t, key, T0+s.At)
			if s.TTL == NoKey && left != NoKey || s.TTL != NoKey && (left > s.TTL || left <= s.TTL-TTLSlack) {
				t.Fatalf("step %d (at +%dµs cost %d op %d): TTL %d ms, want %d", i, s.At, s.Cost, op, left, s.TTL)
			}
		})
	}
}

// stepper is a step of a vector (Step, SlotStep): the policy it puts in
// force from itself on, nil to keep the one before.
type stepper interface{ stepPolicy() *limit.Policy }

func (s Step) stepPolicy() *limit.Policy     { return s.Policy }
func (s SlotStep) stepPolicy() *limit.Policy { return s.Policy }

// runSteps runs one vector as the subtest name, on its own key (keyPrefix
// + name): step once for each of steps in order, with the policy in force
// at it, p until a step sets its own.
func runSteps[S stepper](t *testing.T, keyPrefix, name string, p *limit.Policy, steps []S, step func(t *testing.T, key string, p *limit.Policy, i int, s S)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		key := keyPrefix + name
		for i, s := range steps {
			if sp := s.stepPolicy(); sp != nil {
				p = sp
			}
			step(t, key, p, i, s)
		}
	})
}
