package hotkey

import (
	"context"
	"hash/maphash"
	"slices"
	"sync"

	"github.com/sluice-rl/sluice/limit"
)

// Reset forgets key's hot state, for RL.RESET; the caller resets the key's
// own bucket in the store first. It deletes the key's split sub-buckets in
// the store (whenever p is in split mode: another instance may have made
// them), then, on this instance, drops the key's lease (its tokens were
// taken from the bucket just reset, so they are dropped, not given back;
// so are its returns still queued), and with it the wait of an empty
// claim, and takes the key out of the hot map, so that a key still hot
// hands its fresh budget over to fresh sub-buckets again. A claim in
// flight when Reset runs answers the requests waiting for it; what is
// left of it is dropped too: RL.RESET can under-admit by one block, never
// over-admit. Other instances' leases are not reached: each answers for
// at most one lease TTL after its last claim.
//
// It reports false: what RL.RESET reports is whether the key's own bucket
// existed (a key in a spell has one: it is held), and sub-buckets left
// empty by an earlier reset exist without being spent. An error is the
// first a sub-bucket's reset returned (the state on this instance is
// cleared all the same).
func (h *Layer) Reset(ctx context.Context, key string, p *limit.Policy) (bool, error) {
	_, err := h.resetSubs(ctx, key, p)
	existed := false
	hash := maphash.String(h.seed, key)
	cache := h.leases[hash%leaseShards]
	if l, ok := cache.Peek(key); ok {
		l.mu.Lock()
		l.dropped = true
		l.mu.Unlock()
		cache.Remove(key)
	}
	h.retMu.Lock()
	kept := h.returns[:0]
	for _, r := range h.returns {
		if r.Key != key {
			kept = append(kept, r)
		}
	}
	clear(h.returns[len(kept):])
	h.returns = kept
	h.retMu.Unlock()
	h.drop(key)
	return existed, err
}

// drop takes key out of the hot map, if it is there.
func (h *Layer) drop(key string) {
	sh := &h.hot[maphash.String(h.seed, key)%hotShards]
	if e := (*sh.m.Load())[key]; e != nil {
		h.cool(sh, e)
	}
}

// resetSubs deletes the split sub-buckets of key in the store, all at
// once, and leaves each one empty: the reset's one fresh budget is the
// main bucket's. Another instance may still be in a spell of the key;
// fresh sub-buckets beside a fresh main bucket would be two budgets until
// it renews its hold (which then claims the main bucket's, an
// under-admission), and the next spell's hand-over gives each sub-bucket
// its share of what the main bucket holds then.
func (h *Layer) resetSubs(ctx context.Context, key string, p *limit.Policy) (bool, error) {
	if p == nil || p.Hot.Mode != limit.HotSplit {
		return false, nil
	}
	subs := h.subPolicies(p)
	existed := make([]bool, len(subs))
	errs := make([]error, len(subs))
	var wg sync.WaitGroup
	for i, sp := range subs {
		wg.Go(func() {
			if existed[i], errs[i] = h.store.Reset(ctx, subKey(key, i), sp); errs[i] == nil {
				out := make([]limit.Result, 1)
				h.store.Do(ctx, []limit.Request{{Key: subKey(key, i), Cost: sp.Limit, Op: limit.OpClaim, Policy: sp}}, out)
				errs[i] = out[0].Err
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil { // the first only: it may become a one-line RESP error
			return slices.Contains(existed, true), err
		}
	}
	return slices.Contains(existed, true), nil
}
