package limiter

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// callStore is seenStore counting its Do calls too.
type callStore struct {
	seenStore
	calls atomic.Int64
}

func (s *callStore) Do(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	s.calls.Add(1)
	s.seenStore.Do(ctx, reqs, out)
}

// A pipeline that mixes the operations Decide takes (RL.TAKE, RL.PEEK,
// RL.TAKE … RECEIPT, RL.ADJUST) is one store call holding every request
// that passed its operation's checks; each refused one keeps its error and
// its policy, and each answer is counted by its operation: decisions, a
// correction, errors.
func TestMixedBatchIsOneStoreCall(t *testing.T) {
	t.Parallel()
	rate := &limit.Policy{Name: "rate", Limit: 10, Rate: 10, Period: time.Second, OnStoreError: limit.FailClosed}
	global := &limit.Policy{Name: "global", Limit: 10, Rate: 10, Period: time.Second, OnStoreError: limit.FailClosed, Scope: limit.ScopeGlobal}
	slots := &limit.Policy{Name: "slots", Algorithm: limit.Concurrency, Limit: 2, Period: time.Second, OnStoreError: limit.FailClosed}
	s := &callStore{seenStore: seenStore{st: local.New(local.Config{DecidedBy: limit.ByStore})}}
	var decisions, corrections, errs atomic.Int64
	var errPolicies []string
	l, err := New(Config{
		Policies: MatcherFunc(func(key string) *limit.Policy {
			switch key[0] {
			case 'g':
				return global
			case 's':
				return slots
			case 'n':
				return nil
			}
			return rate
		}),
		Store:        s,
		OnDecision:   func(string, *limit.Policy, *limit.Result) { decisions.Add(1) },
		OnCorrection: func(string, *limit.Policy, string, string, int64) { corrections.Add(1) },
		OnError: func(_ string, p *limit.Policy, _ error) {
			errs.Add(1)
			name := "<nil>"
			if p != nil {
				name = p.Name
			}
			errPolicies = append(errPolicies, name) // one goroutine: Decide's
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	reqs := []limit.Request{
		{Key: "a", Cost: 1, Op: limit.OpTake},
		{Key: "a", Cost: 2, Op: limit.OpAdjust},
		{Key: "b", Cost: 1, Op: limit.OpPeek},
		{Key: "n", Cost: 1, Op: limit.OpTake},                    // no policy
		{Key: "s", Cost: 1, Op: limit.OpAdjust},                  // a concurrency policy
		{Key: "a", Cost: -1, Op: limit.OpAdjust},                 // a give-back without its receipt
		{Key: "g", Cost: 1, Op: limit.OpAdjust},                  // a global policy: not adjustable
		{Key: "c", Cost: 1, Op: limit.OpTake, WantReceipt: true}, // a receipt
	}
	out := make([]limit.Result, len(reqs))
	l.Decide(context.Background(), reqs, out)
	if got := s.calls.Load(); got != 1 {
		t.Fatalf("%d store calls, want 1", got)
	}
	if got := s.seen.Load(); got != 4 {
		t.Fatalf("%d requests reached the store, want the 4 that passed their checks", got)
	}
	for _, i := range []int{0, 1, 2, 7} {
		if out[i].Err != nil || !out[i].Allowed || out[i].DecidedBy != limit.ByStore {
			t.Errorf("request %d (%+v) = %+v, want decided by the store", i, reqs[i], out[i])
		}
	}
	if r := out[7].Receipt; r == "" || !limit.ValidReceipt(r) {
		t.Errorf("the take's receipt %q, want one the client can give back", r)
	}
	var ae *limit.AlgorithmError
	switch {
	case !errors.Is(out[3].Err, limit.ErrNoPolicy):
		t.Errorf("no policy: %v", out[3].Err)
	case !errors.As(out[4].Err, &ae) || ae.Command != "rl.adjust":
		t.Errorf("a concurrency policy: %v", out[4].Err)
	case out[5].Err != limit.ErrReceiptMissing:
		t.Errorf("a give-back without a receipt: %v", out[5].Err)
	case out[6].Err == nil:
		t.Errorf("a global policy's adjust: %+v, want an error", out[6])
	}
	if decisions.Load() != 3 || corrections.Load() != 1 || errs.Load() != 4 {
		t.Errorf("hooks heard %d decisions, %d corrections, %d errors; want 3, 1, 4", decisions.Load(), corrections.Load(), errs.Load())
	}
	if want := []string{"<nil>", "slots", "rate", "global"}; len(errPolicies) != len(want) || errPolicies[0] != want[0] || errPolicies[1] != want[1] || errPolicies[2] != want[2] || errPolicies[3] != want[3] {
		t.Errorf("OnError heard the policies %v, want %v", errPolicies, want)
	}
	if snap := l.Snapshot(); snap.Decisions != 3 || snap.Allowed != 3 || snap.Errors != 4 || snap.Adjusts != 1 || snap.AdjustSpent != 2 {
		t.Errorf("counters %+v", snap)
	}
}
