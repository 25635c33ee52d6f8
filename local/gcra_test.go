package local

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/algotest"
	"github.com/sluice-rl/sluice/limit"
)

var gcraPeriods = []time.Duration{time.Microsecond, 7 * time.Microsecond, time.Millisecond, time.Second, time.Minute, time.Hour, 24 * time.Hour}

// GCRA is the token bucket's limit kept as a TAT: for one policy, any
// sequence of ops, costs and clock steps (back too) gets the same replies,
// and the state is the bucket's mirrored: debt = capacity - units, written
// and deleted at the same steps.
func TestGCRAEqualsTokenBucket(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	for seq := range 2000 {
		var p *limit.Policy
		var b limit.Bucket
		for {
			p = &limit.Policy{
				Limit:  1 + rng.Int64N([]int64{3, 1000, 20_000_000}[rng.IntN(3)]),
				Rate:   1 + rng.Int64N([]int64{10, 2_000_000, 20_000_000}[rng.IntN(3)]),
				Period: gcraPeriods[rng.IntN(len(gcraPeriods))],
			}
			var err error
			if b, err = p.Bucket(); err == nil {
				break
			}
		}
		period := int64(p.Period / time.Microsecond)
		var g GCRAState
		var tb BucketState
		now := algotest.T0 + rng.Int64N(100_000_000_000_000)
		for i := range 40 {
			switch rng.IntN(6) {
			case 0:
				now += rng.Int64N(1000)
			case 1:
				now += rng.Int64N(period + 1)
			case 2:
				now -= rng.Int64N(2 * period) // the clock steps back
			case 3:
				now += 2*period + rng.Int64N(1000)
			case 4:
				now += rng.Int64N(period/max(1, p.Rate) + 2) // about one emission interval
			}
			op := limit.Op(rng.IntN(4))
			cost := rng.Int64N(p.Limit + p.Limit/10 + 2)
			if cost == 0 && op == limit.OpClaim {
				cost = 1 // a claim of 0: see TestGCRACostZero
			}
			want, wrote := TakeBucket(&tb, b, cost, now, op)
			got, changed := TakeGCRA(&g, b, cost, now, op)
			if got != want {
				t.Fatalf("seq %d step %d policy %+v op %d cost %d: gcra %+v, bucket %+v", seq, i, *p, op, cost, got, want)
			}
			if changed != wrote {
				t.Fatalf("seq %d step %d: gcra changed=%v, bucket wrote=%v", seq, i, changed, wrote)
			}
			if changed && (g == GCRAState{}) != (tb == BucketState{}) {
				t.Fatalf("seq %d step %d: gcra state %+v, bucket state %+v", seq, i, g, tb)
			}
			if changed && g != (GCRAState{}) && (g.Debt != b.Capacity-tb.Units || g.At != tb.At || g.Scale != tb.Scale) {
				t.Fatalf("seq %d step %d: gcra state %+v is not the bucket's %+v mirrored", seq, i, g, tb)
			}
		}
	}
}

// A cost of 0 is admitted by every op and spends nothing: the TAT stays.
func TestGCRACostZero(t *testing.T) {
	t.Parallel()
	p := &limit.Policy{Limit: 5, Rate: 1, Period: time.Second}
	b, _ := p.Bucket()
	var st GCRAState
	now := algotest.T0
	TakeGCRA(&st, b, 3, now, limit.OpTake)
	tat := st.At*b.Refill + st.Debt
	for op := limit.OpTake; op <= limit.OpReturn; op++ {
		res, _ := TakeGCRA(&st, b, 0, now+10*1000, op)
		want := limit.Result{Allowed: true, Limit: 5, Remaining: 2, RetryAfterMs: -1, ResetAfterMs: 2990}
		if res != want || st.At*b.Refill+st.Debt != tat {
			t.Fatalf("op %d cost 0: %+v state %+v, want %+v and the TAT unchanged", op, res, st, want)
		}
	}
	var fresh GCRAState
	if res, _ := TakeGCRA(&fresh, b, 0, now, limit.OpTake); !res.Allowed || res.Remaining != 5 || fresh != (GCRAState{}) {
		t.Fatalf("cost 0 on a fresh key: %+v state %+v", res, fresh)
	}
}
