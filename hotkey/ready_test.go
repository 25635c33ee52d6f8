package hotkey

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// subFailStore fails the OpClaims of split sub-buckets while on is set.
type subFailStore struct {
	limit.Store
	on atomic.Bool
}

func (f *subFailStore) Do(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	var pass []limit.Request
	var idx []int
	for i, r := range reqs {
		if f.on.Load() && r.Op == limit.OpClaim && strings.HasPrefix(r.Key, "{") {
			out[i] = limit.Result{Err: &limit.UnavailableError{Node: "fake", Err: context.DeadlineExceeded}}
			continue
		}
		pass = append(pass, r)
		idx = append(idx, i)
	}
	res := make([]limit.Result, len(pass))
	f.Store.Do(ctx, pass, res)
	for j, i := range idx {
		out[i] = res[j]
	}
}

// drainThenRefill plays the checker's hs.i69.a up to its second burst on
// store: the main bucket drained by 16 takes, 450 ms of refill (3.6
// tokens), 3 of them taken, so 0.6 is left.
func drainThenRefill(t *testing.T, store limit.Store, c *clock, key string, p *limit.Policy) {
	t.Helper()
	out := make([]limit.Result, 1)
	store.Do(context.Background(), []limit.Request{{Key: key, Cost: 16, Policy: p}}, out)
	c.Add(450 * time.Millisecond)
	store.Do(context.Background(), []limit.Request{{Key: key, Cost: 3, Policy: p}}, out)
	if !out[0].Allowed {
		t.Fatalf("take of 3 after 450ms = %+v", out[0])
	}
}

// takes takes key n times through h (hot) and counts the admitted and the
// errors.
func takes(h *Layer, key string, p *limit.Policy, n int) (admitted, errs int) {
	for range n {
		res := decideOne(h, key, 1, p)
		switch {
		case res.Err != nil:
			errs++
		case res.Allowed:
			admitted++
		}
	}
	return admitted, errs
}

// The checker's hs.i69.a: a joining instance finds the main bucket held
// by a starter still setting the sub-buckets (an even hold), which on a
// loaded machine takes longer than its probes. It must not split before
// the starter marks the spell ready: the sub-buckets, never written, read
// as full (16 in all) while the main bucket held 0.6. Before, it joined
// as it was after maxProbes and admitted from the full sub-buckets.
func TestSplitJoinerWaitsForReady(t *testing.T) {
	t.Parallel()
	c := newClock()
	store := newStore(c)
	h := newLayer(t, store, c, Config{})
	p := hsPolicy()
	const key = "hs.i69.a"
	drainThenRefill(t, store, c, key, p)
	// The starter's call 1: it claims the main bucket (G = 0) and holds
	// it, even; its call 2 has not come.
	out := make([]limit.Result, 1)
	store.Do(context.Background(), []limit.Request{{Key: key, Cost: p.Limit, Op: limit.OpClaim, Policy: p,
		Hold: c.Now().Add(HoldFor-time.Millisecond).UnixMicro() &^ 1}}, out) // not the joiner's own hold
	heat(t, h, key, p, c.Now())
	admitted, errs := takes(h, key, p, 20)
	t.Logf("before the spell is ready: %d admitted, %d errors of 20", admitted, errs)
	if admitted > 0 {
		t.Fatalf("the joiner admitted %d before the spell was ready; the main bucket held 0.6", admitted)
	}
	// The starter sets the sub-buckets to its share of G = 0, and marks
	// the spell ready; the joiner now joins and leaves them.
	subs := h.subPolicies(p)
	reqs := []limit.Request{{Key: key, Cost: p.Limit, Op: limit.OpClaim, Policy: p, Hold: -(c.Now().Add(HoldFor).UnixMicro() | 1)}}
	for s, sp := range subs {
		reqs = append(reqs, limit.Request{Key: subKey(key, s), Cost: sp.Limit, Op: limit.OpClaim, Policy: sp})
	}
	store.Do(context.Background(), reqs, make([]limit.Result, len(reqs)))
	admitted, errs = takes(h, key, p, 20)
	t.Logf("once ready: %d admitted, %d errors of 20", admitted, errs)
	if admitted > 0 || errs > 0 {
		t.Fatalf("once ready: %d admitted, %d errors, want 0 and 0 (the sub-buckets were emptied)", admitted, errs)
	}
	c.Add(600 * time.Millisecond) // 1.2 tokens a sub-bucket
	if admitted, _ = takes(h, key, p, 20); admitted != 4 {
		t.Fatalf("600ms later: %d admitted, want 4 (one a sub-bucket)", admitted)
	}
}

// A starter whose sub-bucket claims fail (twice: a deadline under load)
// must not mark the spell ready with the sub-buckets full: it tries the
// hand-over again. Before, it split at once over 16 tokens the main
// bucket never held.
func TestSplitHandoffSubClaimsFail(t *testing.T) {
	t.Parallel()
	c := newClock()
	fs := &subFailStore{Store: newStore(c)}
	h := newLayer(t, fs, c, Config{})
	p := hsPolicy()
	const key = "hs.i69.a"
	drainThenRefill(t, fs, c, key, p)
	heat(t, h, key, p, c.Now())
	fs.on.Store(true)
	admitted, errs := takes(h, key, p, 20)
	t.Logf("sub-bucket claims failing: %d admitted, %d errors of 20", admitted, errs)
	if admitted > 0 {
		t.Fatalf("admitted %d with the sub-buckets never set; the main bucket held 0.6", admitted)
	}
	fs.on.Store(false)
	admitted, errs = takes(h, key, p, 20)
	t.Logf("then: %d admitted, %d errors of 20", admitted, errs)
	if admitted > 0 || errs > 0 {
		t.Fatalf("then %d admitted, %d errors: want 0 and 0", admitted, errs)
	}
	c.Add(600 * time.Millisecond)
	if admitted, _ = takes(h, key, p, 20); admitted != 4 {
		t.Fatalf("600ms later: %d admitted, want 4 (one a sub-bucket)", admitted)
	}
}
