package layercheck

import (
	"context"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/sluice-rl/sluice/limit"
)

// adjust sends RL.ADJUST key delta to one instance and books it: a
// give-back (delta < 0) in the key's Back, which the check counts as
// letting as many more be admitted; a spend (delta > 0) as nothing (it
// only refuses later takes); a fallback answer makes the key
// inconclusive, as a take's does. A global policy must refuse it. A
// give-back needs a receipt (docs/receipts.md): it is sent first without
// one, which must be refused (and is booked as nothing), then after a
// take of -delta with RECEIPT (booked as a take), with its receipt.
func (it *iteration) adjust(t *rapid.T, ctx context.Context) {
	_, p := it.w.pick(t)
	key := it.drawKey(t, "key")
	delta := int64(rapid.SampledFrom([]int{-3, -2, -1, 0, 1, 2, 5}).Draw(t, "delta"))
	args := []any{"RL.ADJUST", key, delta}
	if delta < 0 {
		if err := p.rc.Do(ctx, "RL.ADJUST", key, delta).Err(); err == nil || !strings.Contains(err.Error(), "scope: global") && !strings.Contains(err.Error(), "name its receipt") {
			t.Fatalf("RL.ADJUST %q %d without a receipt on %s: %v, want refused", key, delta, p.name, err)
		}
		sent := time.Now()
		v, err := p.rc.Do(ctx, "RL.TAKE", key, -delta, "RECEIPT").Slice()
		recv := time.Now()
		if err != nil || len(v) != 7 {
			t.Fatalf("RL.TAKE %q %d RECEIPT on %s: %v %v", key, -delta, p.name, v, err)
		}
		r, err := parseReply(v[:6])
		if err != nil {
			t.Fatalf("RL.TAKE %q %d RECEIPT on %s: %v", key, -delta, p.name, err)
		}
		it.record("resp", key, -delta, sent, recv, r, true)
		rc, _ := v[6].(string)
		it.logf(t, "%5d take %s %q %d RECEIPT -> %v %q", it.ms(recv), p.name, key, -delta, r, rc)
		if rc == "" {
			return // nothing to give back
		}
		args = append(args, rc)
	}
	sent := time.Now()
	v, err := p.rc.Do(ctx, args...).Result()
	recv := time.Now()
	if err != nil {
		if strings.Contains(err.Error(), "scope: global") {
			it.w.count("adjust-global")
			it.logf(t, "%5d adjust %s %q %d -> %v", it.ms(recv), p.name, key, delta, err)
			return
		}
		t.Fatalf("RL.ADJUST %q %d on %s: %v", key, delta, p.name, err)
	}
	r, err := parseReply(v)
	if err != nil {
		t.Fatalf("RL.ADJUST %q %d on %s: %v", key, delta, p.name, err)
	}
	closed := strings.HasSuffix(r.DecidedBy, "-closed")
	unrecorded := closed || delta < 0 && (strings.HasPrefix(r.DecidedBy, "fallback-") || strings.HasPrefix(r.DecidedBy, "overload-"))
	if r.Remaining < 0 || r.Remaining > r.Limit || r.RetryAfter != -1 && !closed || (r.Allowed == 1) == unrecorded {
		t.Fatalf("reply shape (RL.ADJUST %q %d on %s): %v", key, delta, p.name, r)
	}
	it.mu.Lock()
	k := it.log(key, false)
	switch {
	case strings.HasPrefix(r.DecidedBy, "fallback-") || strings.HasPrefix(r.DecidedBy, "overload-"):
		k.Fallback = append(k.Fallback, r.DecidedBy)
	case r.DecidedBy == limit.ByShadow:
	case delta < 0:
		k.Back = append(k.Back, Admission{Sent: sent, Recv: recv, Cost: -delta, By: r.DecidedBy, Door: "adjust"})
	}
	it.mu.Unlock()
	it.w.count("adjust")
	it.logf(t, "%5d adjust %s %q %d -> %v", it.ms(recv), p.name, key, delta, r)
}
