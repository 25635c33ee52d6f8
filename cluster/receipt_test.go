package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// On a real Redis Cluster, for keys of every shape of the layout (a plain
// key, a user tag, a '}' without a tag, which Redis hashes whole): a take
// with a receipt, batched beside plain takes, records its receipt on the
// state's slot with the TTL of a refill from empty; the give-back uses it
// once; a give-back without one is refused and nothing is sent.
func TestReceiptsOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	s, err := New(Config{Addrs: c.Addrs(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	p := &limit.Policy{Name: "p", Limit: 10, Rate: 1, Period: time.Hour} // 10 h from empty to full
	for _, key := range []string{"plain", "{acme}:login", "tenant}1", "a{}b"} {
		id := limit.NewReceipt()
		reqs := []limit.Request{
			{Key: key, Cost: 4, Policy: p, Receipt: id},
			{Key: key + ":x", Cost: 1, Policy: p},
			{Key: key + ":y", Cost: 1, Policy: p},
			{Key: key + ":z", Cost: 1, Policy: p},
		}
		out := make([]limit.Result, len(reqs))
		s.Do(ctx, reqs, out)
		for i := range out {
			if out[i].Err != nil || !out[i].Allowed {
				t.Fatalf("%s: request %d: %+v", key, i, out[i])
			}
		}
		if out[0].Receipt != id || out[1].Receipt != "" {
			t.Fatalf("%s: receipts %q %q, want %q and none", key, out[0].Receipt, out[1].Receipt, id)
		}
		ttl, err := c.ClusterClient().PTTL(ctx, ReceiptKey(key, id)).Result()
		if err != nil || ttl <= 10*time.Hour-time.Minute || ttl > 10*time.Hour {
			t.Fatalf("%s: receipt PTTL %v (%v), want 10 h", key, ttl, err)
		}
		give := func(delta int64, receipt string) limit.Result {
			one := make([]limit.Result, 1)
			s.Do(ctx, []limit.Request{{Key: key, Cost: delta, Op: limit.OpAdjust, Policy: p, Receipt: receipt}}, one)
			return one[0]
		}
		if r := give(-4, ""); r.Err != limit.ErrReceiptMissing {
			t.Fatalf("%s: give-back without a receipt: %+v", key, r)
		}
		if r := give(-4, id); r.Err != nil || r.Remaining != 10 {
			t.Fatalf("%s: give-back: %+v, want 10 left", key, r)
		}
		if r := give(-4, id); r.Err != limit.ErrReceiptInvalid {
			t.Fatalf("%s: give-back again: %+v", key, r)
		}
		if n, err := c.ClusterClient().Exists(ctx, ReceiptKey(key, id)).Result(); err != nil || n != 0 {
			t.Fatalf("%s: the used receipt is still in Redis (%d, %v)", key, n, err)
		}
	}
}
