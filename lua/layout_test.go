package lua_test

import (
	"context"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/algotest"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// stateValue is a stored state as state.lua lays it out, encoded here
// independently of the scripts: a tag byte, then three little-endian
// doubles. Scripts of different versions run side by side during a
// rolling upgrade, so every version must read and write exactly this.
func stateValue(tag byte, f1, f2, f3 int64) string {
	b := make([]byte, 25)
	b[0] = tag
	for i, f := range []int64{f1, f2, f3} {
		binary.LittleEndian.PutUint64(b[1+8*i:], math.Float64bits(float64(f)))
	}
	return string(b)
}

// The stored layout is the same byte for byte as the scripts before the
// per-decision work was cut: a state written in that layout (tag, three
// doubles) is read as its fields, and what a take writes back is that
// layout with the fields the Go model expects, by the single-key script
// and by the batch script alike.
func TestStateLayoutIsStable(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	rc := node.Client()
	now := algotest.T0
	for _, alg := range []limit.Algorithm{limit.TokenBucket, limit.GCRA, limit.SlidingWindow, limit.FixedWindow} {
		p := &limit.Policy{Algorithm: alg, Limit: 10, Rate: 1, Period: time.Hour}
		// value is the stored state after n takes of 1 at now from none
		value := func(n int64) string {
			switch alg {
			case limit.TokenBucket:
				b, _ := p.Bucket()
				return stateValue('b', b.Capacity-n*b.Scale, now, b.Scale)
			case limit.GCRA:
				b, _ := p.Bucket()
				return stateValue('g', now, n*b.Scale, b.Scale)
			}
			w, _ := p.Window()
			span := w.Ticks * w.Tick
			return stateValue('w', now/span*span, n, 0)
		}
		for _, form := range []string{"single", "batch"} {
			key := "layout:" + string(alg) + ":" + form
			if err := rc.Set(ctx, key, value(3), time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			st := local.State{}
			for range 3 {
				if _, _, err := local.Decide(&st, local.Input{Policy: p, Op: limit.OpTake, Cost: 1, Now: now}); err != nil {
					t.Fatal(err)
				}
			}
			want, _, _ := local.Decide(&st, local.Input{Policy: p, Op: limit.OpTake, Cost: 1, Now: now})
			var got limit.Result
			if form == "single" {
				got = evalAt(ctx, rc, key, p, 1, limit.OpTake, now)
			} else {
				_, res, err := batchAt(ctx, rc, []batchItem{{key, p, 1, limit.OpTake, 0}}, now)
				if err != nil {
					t.Fatal(err)
				}
				got = res[0]
			}
			if got != want {
				t.Errorf("%s %s: take on a stored state: lua %+v, go %+v", alg, form, got, want)
			}
			stored, err := rc.Get(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if w := value(4); stored != w {
				t.Errorf("%s %s: stored %x, want %x", alg, form, stored, w)
			}
		}
	}
}
