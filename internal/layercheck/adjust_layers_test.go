package layercheck

import (
	"context"
	"strings"
	"time"

	"pgregory.net/rapid"
)

// adjust sends RL.ADJUST key delta, a spend (delta >= 0), to one
// instance: it is booked as nothing (it only refuses later takes), and a
// fallback answer makes the key inconclusive, as a take's does. A global
// policy must refuse it. Give-backs (delta < 0) are the give-back
// action's, with receipts (hostile_test.go).
func (it *iteration) adjust(t *rapid.T, ctx context.Context) {
	_, p := it.w.pick(t)
	key := it.drawKey(t, "key")
	delta := int64(rapid.SampledFrom([]int{0, 1, 2, 5}).Draw(t, "delta"))
	sent := time.Now()
	v, err := p.rc.Do(ctx, "RL.ADJUST", key, delta).Result()
	recv := time.Now()
	if err != nil && it.w.unknownOutcome(p, sent, recv, err) {
		// a spend of unknown outcome only refuses later takes: nothing to book
		it.logf(t, "%5d adjust %s %q %d -> unknown outcome: %v", it.ms(recv), p.name, key, delta, err)
		return
	}
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
	if r.Remaining < 0 || r.Remaining > r.Limit || r.RetryAfter != -1 && !closed || (r.Allowed == 1) == closed {
		t.Fatalf("reply shape (RL.ADJUST %q %d on %s): %v", key, delta, p.name, r)
	}
	if strings.HasPrefix(r.DecidedBy, "fallback-") || strings.HasPrefix(r.DecidedBy, "overload-") {
		it.mu.Lock()
		k := it.log(key, false)
		k.Fallback = append(k.Fallback, r.DecidedBy)
		it.mu.Unlock()
	}
	it.w.count("adjust")
	it.logf(t, "%5d adjust %s %q %d -> %v", it.ms(recv), p.name, key, delta, r)
}
