package hotkey

import (
	"context"
	"errors"

	"github.com/sluice-rl/sluice/limit"
)

// The accounting of leased tokens given back: queued as leases die, sent
// in one store call by the expiry goroutine and Close, and dropped when
// the policies in force change.

// giveBack queues n tokens of l, claimed in epoch, for OpReturn by the
// expiry goroutine or Close; tokens of an earlier epoch are dropped (see
// PoliciesChanged).
func (h *Layer) giveBack(l *lease, n int64, epoch uint64) {
	if n <= 0 {
		return
	}
	h.retMu.Lock()
	if epoch == h.epoch.Load() {
		h.returns = append(h.returns, limit.Request{Key: l.key, Cost: n, Op: limit.OpReturn, Policy: l.p})
	}
	h.retMu.Unlock()
}

// PoliciesChanged tells the Layer that the policies in force changed
// (RL.POLICY SET or DEL, here or on another instance, a reload): call it
// before the first request decided under the new ones. Every token leased
// before is dropped, not given back, and so is every return still queued:
// a leased token admits only under the policy it was claimed under, while
// that policy has stayed in force. A policy that comes back (RL.POLICY DEL
// brings the file's back, with its pointer) finds nothing held from
// before, though the key's state went on under another meanwhile. It
// under-admits by what this instance held, at most one block per leased
// key (max(1, limit/16)), once per change; it takes no lock of a lease.
func (h *Layer) PoliciesChanged() {
	h.retMu.Lock()
	h.epoch.Add(1)
	clear(h.returns)
	h.returns = h.returns[:0]
	h.retMu.Unlock()
}

// flush sends the queued returns in one store call.
func (h *Layer) flush(ctx context.Context) error {
	h.retMu.Lock()
	reqs := h.returns
	h.returns = nil
	h.retMu.Unlock()
	if len(reqs) == 0 {
		return nil
	}
	out := make([]limit.Result, len(reqs))
	h.store.Do(ctx, reqs, out)
	var errs []error
	for i, r := range out {
		h.st.returns.Add(1)
		if r.Err != nil {
			h.st.returnErrs.Add(1)
			errs = append(errs, r.Err)
			continue
		}
		h.st.returned.Add(reqs[i].Cost)
	}
	return errors.Join(errs...)
}
