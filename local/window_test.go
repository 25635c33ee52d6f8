package local

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// A window that counts nothing is the zero State, as the scripts DEL it.
func TestWindowEmptyIsAbsent(t *testing.T) {
	t.Parallel()
	const now = 1_700_000_000_000_000
	for _, alg := range []limit.Algorithm{limit.SlidingWindow, limit.FixedWindow} {
		p := &limit.Policy{Algorithm: alg, Limit: 10, Rate: 1, Period: time.Second}
		var st State
		if _, changed, _ := Decide(&st, Input{Policy: p, Op: limit.OpTake, Cost: 3, Now: now}); !changed || st == (State{}) {
			t.Fatalf("%s: a take left %+v (changed %v)", alg, st, changed)
		}
		if res, changed, _ := Decide(&st, Input{Policy: p, Op: limit.OpReturn, Cost: 5, Now: now}); !changed || st != (State{}) || res.Remaining != 10 {
			t.Fatalf("%s: returning more than was taken left %+v, %+v", alg, st, res)
		}
		// rejected and peeked requests change nothing
		Decide(&st, Input{Policy: p, Op: limit.OpTake, Cost: 10, Now: now})
		before := st
		for _, op := range []limit.Op{limit.OpTake, limit.OpPeek, limit.OpClaim} {
			if _, changed, _ := Decide(&st, Input{Policy: p, Op: op, Cost: 1, Now: now + 1}); changed || st != before {
				t.Fatalf("%s op %d on a full window changed the state", alg, op)
			}
		}
	}
}

// On a clock that only moves forward, no window aligned to the epoch ever
// admits more than the limit, under either algorithm (the sliding estimate
// counts the current window in full).
func TestWindowNeverAdmitsPastTheLimit(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	periods := []time.Duration{time.Microsecond, 7 * time.Microsecond, time.Millisecond, time.Second, time.Hour}
	for range 300 {
		for _, alg := range []limit.Algorithm{limit.SlidingWindow, limit.FixedWindow} {
			p := &limit.Policy{Algorithm: alg, Limit: 1 + rng.Int64N(50), Rate: 1, Period: periods[rng.IntN(len(periods))]}
			w, err := p.Window()
			if err != nil {
				t.Fatal(err)
			}
			length := w.Length()
			var st State
			now := int64(1_700_000_000_000_000) + rng.Int64N(length)
			admitted := map[int64]int64{}
			for range 200 {
				now += rng.Int64N(length/4 + 1)
				cost := 1 + rng.Int64N(p.Limit)
				op := limit.OpTake
				if rng.IntN(3) == 0 {
					op = limit.OpClaim
				}
				res, _, err := Decide(&st, Input{Policy: p, Op: op, Cost: cost, Now: now})
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case op == limit.OpClaim:
					admitted[now/length] += res.Granted
				case res.Allowed:
					admitted[now/length] += cost
				}
				if n := admitted[now/length]; n > p.Limit {
					t.Fatalf("%s %+v: %d admitted in one window", alg, *p, n)
				}
			}
		}
	}
}

// The products the scripts form stay exact doubles for the extreme
// policies limit.Window accepts.
func TestWindowProductsBelow53Bits(t *testing.T) {
	t.Parallel()
	for _, period := range []time.Duration{time.Microsecond, time.Second, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour} {
		for _, n := range []int64{1, 1000, 34_000, 1_000_000, 34_000_000, limit.MaxScaled/4 - 1} {
			p := &limit.Policy{Algorithm: limit.SlidingWindow, Limit: n, Rate: 1, Period: period}
			w, err := p.Window()
			if err != nil {
				continue
			}
			if 3*w.Limit > limit.MaxScaled/w.Ticks {
				t.Errorf("%d per %s: 3 × %d × %d is not below 2^53", n, period, w.Limit, w.Ticks)
			}
		}
	}
}

// A fixed window whose count was written under a higher limit (6 of 6)
// while another instance holds a lower one (4): that instance's adjust —
// a spend, or RL.ADJUST 0 — or give-back must not store the count clamped
// to its own limit, or the instance still on 6 admits again what the
// write forgot (the checker of issue 29 saw fw.i2.b admit 8 in a window of
// 6: a count of 6 written back as 4 by RL.ADJUST 0 under limit 4).
func TestFixedWindowWriteKeepsCountAboveLoweredLimit(t *testing.T) {
	const sec = int64(1_000_000)
	now := 1_700_000_000*sec + 100_000
	start := now - now%sec
	low, high := limit.Window{Limit: 4, Ticks: sec, Tick: 1}, limit.Window{Limit: 6, Ticks: sec, Tick: 1}
	for _, tt := range []struct {
		name string
		cost int64 // of an OpReturn: < 0 a spend, 0 RL.ADJUST 0, > 0 a give-back
		want int64 // the stored count after
	}{
		{"adjust 0", 0, 6},
		{"spend", -1, 6},
		{"give-back of 1", 1, 5},
	} {
		st := WindowState{W: start, C: 6}
		TakeFixedWindow(&st, low, tt.cost, now, limit.OpReturn)
		if st.C != tt.want {
			t.Errorf("%s under limit 4 on a count of 6: stored %d, want %d", tt.name, st.C, tt.want)
		}
		res, _ := TakeFixedWindow(&st, high, 1, now+1, limit.OpTake)
		if wantAllowed := tt.want < 6; res.Allowed != wantAllowed {
			t.Errorf("%s, then a take under limit 6: allowed %v, want %v", tt.name, res.Allowed, wantAllowed)
		}
	}
}
