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
// inconclusive, as a take's does. A global policy must refuse it.
func (it *iteration) adjust(t *rapid.T, ctx context.Context) {
	_, p := it.w.pick(t)
	key := it.drawKey(t, "key")
	delta := int64(rapid.SampledFrom([]int{-3, -2, -1, 0, 1, 2, 5}).Draw(t, "delta"))
	sent := time.Now()
	v, err := p.rc.Do(ctx, "RL.ADJUST", key, delta).Result()
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
	if r.Remaining < 0 || r.Remaining > r.Limit || r.RetryAfter != -1 && !closed || (r.Allowed == 1) == closed {
		t.Fatalf("reply shape (RL.ADJUST %q %d on %s): %v", key, delta, p.name, r)
	}
	it.mu.Lock()
	k := it.log(key, false)
	switch {
	case strings.HasPrefix(r.DecidedBy, "fallback-") || strings.HasPrefix(r.DecidedBy, "overload-"):
		k.Fallback = append(k.Fallback, r.DecidedBy)
	case r.DecidedBy == limit.ByShadow:
	case delta < 0:
		k.Backs = append(k.Backs, GiveBack{Sent: sent, Recv: recv, Delta: -delta, Applied: true, By: r.DecidedBy, Who: "owner"})
	}
	it.mu.Unlock()
	it.w.count("adjust")
	it.logf(t, "%5d adjust %s %q %d -> %v", it.ms(recv), p.name, key, delta, r)
}
