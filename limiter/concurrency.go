package limiter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sluice-rl/sluice/limit"
)

// slotStats count RL.ACQUIRE and RL.RELEASE.
type slotStats struct {
	acquires, acquired, releases, released atomic.Int64
	overFallback                           atomic.Int64 // store admissions refused for the fallback's slots
}

// SlotSnapshot is a copy of the slot counters: acquires decided (Acquires,
// of which Acquired admitted) and releases answered (Releases, of which
// Released freed a held slot); OverFallback, acquires the store admitted
// but the fallback's slots did not leave room for; and the orphans
// (orphans.go): slots queued for release in the background (Orphans),
// freed or expired (OrphansFreed), given up (OrphansDropped: they free
// themselves by their TTL).
type SlotSnapshot struct {
	Acquires, Acquired, Releases, Released int64
	OverFallback                           int64
	Orphans, OrphansFreed, OrphansDropped  int64
}

// SlotSnapshot returns the slot counters now.
func (l *Limiter) SlotSnapshot() SlotSnapshot {
	return SlotSnapshot{Acquires: l.slots.acquires.Load(), Acquired: l.slots.acquired.Load(),
		Releases: l.slots.releases.Load(), Released: l.slots.released.Load(), OverFallback: l.slots.overFallback.Load(),
		Orphans: l.orphans.queued.Load(), OrphansFreed: l.orphans.freed.Load(), OrphansDropped: l.orphans.dropped.Load()}
}

// ErrSlotTTL marks the error (a *limit.SlotTTLError) of an acquire whose
// ttl_ms is above its policy's max_ttl, limit.MaxSlotTTL without one (the
// doors check that bound first, with their own words).
var ErrSlotTTL = limit.ErrSlotTTL

// errNoSlots is the error of RL.ACQUIRE on a store that holds no slots.
var errNoSlots = errors.New("this store does not hold concurrency slots")

// NewToken returns a slot token: 128 bits from crypto/rand, in hex. No
// one can guess another holder's, and one key's is unknown under every
// other (the store keeps slots per key).
func NewToken() string {
	var b [limit.TokenBytes]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
	return hex.EncodeToString(b[:])
}

// slotPolicy returns key's policy, and the error of cmd on it unless it
// is a concurrency policy: limit.ErrNoPolicy when none matches (the policy
// is then nil), else an algorithm error.
func (l *Limiter) slotPolicy(key, cmd string) (*limit.Policy, error) {
	p := l.policies.Match(key)
	switch {
	case p == nil:
		return nil, fmt.Errorf("%w '%s'", limit.ErrNoPolicy, key)
	case !p.Algorithm.IsConcurrency():
		return p, wrongAlgorithm(cmd, p)
	}
	return p, nil
}

// Acquire decides RL.ACQUIRE key [ttl_ms]: one of the policy's slots for
// ttlMs (0: the policy's period; the door bounds it by limit.MaxSlotTTL),
// and the token that names it ("" when refused). A store that cannot
// answer sends it to on_store_error (on_overload when it is overloaded):
// open admits, and records the slot in the in-process fallback (RL.RELEASE
// frees it there), closed refuses, local takes a slot of this instance's
// share (limit.Policy.Share: local_share × limit, rounded down, at least 1)
// in the fallback. Once the store answers again, the fallback's slots of
// the key count against its answers (countFallback), and an acquire that
// timed out is released in the background (orphans.go). A shadow policy admits what it would refuse,
// with a token that holds nothing. Refusals never enter the deny cache: a
// release frees a slot at once.
func (l *Limiter) Acquire(ctx context.Context, key string, ttlMs int64) (limit.Result, string) {
	p, err := l.slotPolicy(key, "rl.acquire")
	var res limit.Result
	token := ""
	if err == nil {
		res, token = l.acquire(ctx, key, p, ttlMs)
	} else {
		res.Err = err
	}
	if res.Err == nil {
		l.slots.acquires.Add(1)
		if res.Allowed {
			l.slots.acquired.Add(1)
		}
		l.countDecision(l.front(ctx), p, &res)
	} else {
		l.countError(l.front(ctx), p, res.Err)
	}
	if !res.Allowed {
		token = ""
	}
	return res, token
}

func (l *Limiter) acquire(ctx context.Context, key string, p *limit.Policy, ttlMs int64) (limit.Result, string) {
	sp, err := p.Slots()
	if err != nil {
		return limit.Result{Err: err}, ""
	}
	if ttlMs, err = sp.TTL(p.Name, ttlMs); err != nil { // max_ttl
		return limit.Result{Err: err}, ""
	}
	ss := l.slotStore
	if ss == nil {
		return limit.Result{Err: errNoSlots}, ""
	}
	token := NewToken()
	dctx, cancel := l.deadline(ctx)
	res := ss.Acquire(dctx, key, p, token, ttlMs)
	cancel()
	switch {
	case res.Err != nil && errors.Is(res.Err, limit.ErrUnavailable):
		l.stats.StoreErrors.Add(1)
		if mayHaveRun(res.Err) {
			l.orphan(key, p, token, ttlMs)
		}
		res = l.onSlotError(ctx, key, p, token, ttlMs, res.Err)
	case res.Err == nil && !l.inProcess:
		res = l.countFallback(key, p, token, ttlMs, res)
	}
	if p.Shadow && res.Err == nil && !res.Allowed {
		res.Allowed, res.RetryAfterMs, res.DecidedBy = true, -1, limit.ByShadow
		token = NewToken() // holds nothing
	}
	return res, token
}

// mayHaveRun reports whether an acquire that failed with err may still
// have taken its slot in the store: every connectivity failure but an
// overload turned away before it was sent.
func mayHaveRun(err error) bool {
	var oe *limit.OverloadError
	return !errors.As(err, &oe) || oe.Left <= 0
}

// fallbackSlots is the in-process fallback's count of the slots it holds
// (local.Store): slots taken by `local`, and those `open` admitted, while
// the store could not answer, which the store knows nothing of.
type fallbackSlots interface {
	Held(key string, p *limit.Policy) (held, nextMs, lastMs int64)
}

// countFallback counts the slots the fallback holds for key against the
// store's answer res, so that one instance never holds more than limit
// once the store answers again (docs/concurrency.md, "When the store
// cannot answer"): an acquire the store admitted past what they leave is
// refused, and its slot released in the background (an orphan).
func (l *Limiter) countFallback(key string, p *limit.Policy, token string, ttlMs int64, res limit.Result) limit.Result {
	fs, ok := l.fallback.(fallbackSlots)
	if !ok {
		return res
	}
	n, nextMs, lastMs := fs.Held(key, p)
	if n == 0 {
		return res
	}
	if res.Allowed && res.Remaining < n {
		l.orphan(key, p, token, ttlMs)
		res.Allowed = false
		res.RetryAfterMs = max(1, nextMs)
		l.slots.overFallback.Add(1)
	}
	res.Remaining = max(0, res.Remaining-n)
	res.ResetAfterMs = max(res.ResetAfterMs, lastMs)
	if !res.Allowed && res.RetryAfterMs > 0 {
		res.RetryAfterMs = min(res.RetryAfterMs, max(1, nextMs))
	}
	return res
}

// slotHolder is the in-process fallback holding a slot past the limit
// (local.Store, up to local.HoldCap): the slots `open` admits.
type slotHolder interface {
	Hold(key string, p *limit.Policy, token string, ttlMs int64)
}

// onSlotError is on_store_error (or on_overload) for an acquire whose
// store call failed for connectivity with err.
func (l *Limiter) onSlotError(ctx context.Context, key string, p *limit.Policy, token string, ttlMs int64, err error) limit.Result {
	mode, open, closed, share := p.OnStoreError, limit.ByFallbackOpen, limit.ByFallbackClosed, limit.ByFallbackLocal
	if errors.Is(err, limit.ErrOverload) {
		mode, open, closed, share = p.OverloadMode(), limit.ByOverloadOpen, limit.ByOverloadClosed, limit.ByOverloadLocal
	}
	switch mode {
	case limit.FailOpen:
		// Nothing is known of the slots: report them as free. The
		// fallback keeps the token past the limit, so that the slot
		// counts against the store's answers once the store is back, and
		// RL.RELEASE frees it.
		if fs, ok := l.fallback.(slotHolder); ok {
			fs.Hold(key, p, token, ttlMs)
		}
		return limit.Result{Allowed: true, Limit: p.Limit, Remaining: p.Limit, RetryAfterMs: -1, DecidedBy: open}
	case limit.FailLocal:
		if fs, ok := l.fallback.(limit.SlotStore); ok {
			res := fs.Acquire(ctx, key, p.Share(), token, ttlMs)
			res.DecidedBy = share
			return res
		}
	}
	return limit.Result{Limit: p.Limit, RetryAfterMs: l.closedRetry.Milliseconds(), DecidedBy: closed}
}

// Release decides RL.RELEASE key token: it frees the slot and reports
// whether it was held. The in-process fallback is asked too (a slot taken
// there while the store could not answer is freed there), so the answer
// is true when either held it. A store that cannot answer is an error
// (limit.ErrUnavailable) unless the fallback held the slot; either way the
// store's slot, if any, is released in the background once the store
// answers again (orphans.go).
func (l *Limiter) Release(ctx context.Context, key, token string) (bool, error) {
	p, err := l.slotPolicy(key, "rl.release")
	if err != nil {
		l.stats.Errors.Add(1)
		return false, l.failed(ctx, p, err) // p: the rate policy RL.RELEASE was refused for
	}
	held := false
	if fs, ok := l.fallback.(limit.SlotStore); ok && !l.inProcess {
		held, _ = fs.Release(ctx, key, p, token) // a slot `local` took, or `open` admitted
	}
	ss := l.slotStore
	if ss == nil {
		return false, l.failed(ctx, p, errNoSlots)
	}
	dctx, cancel := l.deadline(ctx)
	inStore, err := ss.Release(dctx, key, p, token)
	cancel()
	if err != nil && errors.Is(err, limit.ErrUnavailable) {
		// The slot, if the store holds it, is freed in the background
		// once the store answers again, rather than by its TTL.
		l.orphan(key, p, token, limit.MaxSlotTTL.Milliseconds())
	}
	if err != nil && !held {
		if errors.Is(err, limit.ErrUnavailable) {
			l.stats.StoreErrors.Add(1)
		}
		l.stats.Errors.Add(1)
		return false, l.failed(ctx, p, err)
	}
	l.slots.releases.Add(1)
	if held || inStore {
		l.slots.released.Add(1)
		l.corrected(ctx, p, CorrectionRelease, "", 0)
	} else {
		l.corrected(ctx, p, CorrectionReleaseUnknown, "", 0)
	}
	return held || inStore, nil
}
