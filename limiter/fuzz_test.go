package limiter

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// FuzzMTake runs random RL.MTAKE calls over six keys (two hash tags, random
// policies of every algorithm, some shadow) against a model, under each
// way a store groups keys (one atomic group, one group per key, groups by
// hash tag). The model: the enforced rules of a call are taken one after
// another on a copy of their state, and kept only when all allow; each
// shadow rule is taken alone on its own state, whatever the others do.
// Checked after every call: allowed is the model's; each shadow rule's
// reply is allowed, decided_by shadow, with the model's remaining; every
// key's state, peeked, is the model's. With the clock frozen, one more
// property, stated on its own: the cost admitted on an enforced key never
// exceeds its limit, whatever the shadow rules do.
//
// Input: byte 0 picks the store (low bits) and whether the clock moves
// (bit 7); then 3 bytes per key (algorithm and shadow, limit, rate and
// period); then calls of 4 bytes: rules (1..4) and clock step, then one
// byte per rule, the key (low 3 bits) and the cost (high bits).
func FuzzMTake(f *testing.F) {
	// The example: win (4 an hour) and the shadow rule dark (1 an
	// hour) on one hash tag, `RL.MTAKE win 1 dark 1` eight times.
	f.Add([]byte("\x00" + "\x00\x03\x83\x80\x00\x80\x00\x03\x83\x80\x00\x80\x00\x03\x83\x80\x00\x80" + strings.Repeat("\x01\x00\x00\x00\x00\x01", 8)))
	f.Add([]byte("\x82" + "\x10\x02\x21\x91\x00\x11\x20\x05\x02\xb1\x00\x10\x30\x01\x12\xa1\x03\x00" + "\x03\x10\x00\x00\x08\x01\x0b" + "\x02\xff\x01\x00\x10\x0c" + "\x03\x00\x00\x00\x00\x01\x02"))
	f.Add([]byte("\x01" + "\x31\x04\x01\x21\x00\x00\x00\x02\x01\x80\x01\x01\x11\x02\x02\x00\x03\x03" + "\x04\x01\x00\x00\x00\x01\x02\x03" + "\x04\x01\x00\x00\x00\x01\x02\x03"))
	keys := [6]string{"{a}:0", "{a}:1", "{a}:2", "{b}:0", "{b}:1", "{b}:2"}
	periods := [4]time.Duration{time.Second, time.Minute, time.Hour, 250 * time.Millisecond}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1+3*len(keys) {
			return
		}
		var clock atomic.Int64
		clock.Store(time.Unix(1_700_000_000, 0).UnixNano())
		now := func() time.Time { return time.Unix(0, clock.Load()) }
		ls := local.New(local.Config{Now: now})
		store := [3]limit.Store{ls, slotStore{ls}, tagStore{ls}}[int(data[0]&3)%3]
		moves := data[0]&0x80 != 0
		var pols [len(keys)]*limit.Policy
		byKey := map[string]*limit.Policy{}
		for k := range keys {
			b := data[1+3*k : 4+3*k]
			pols[k] = &limit.Policy{Name: "p" + strconv.Itoa(k),
				Algorithm: limit.Algorithms[int(b[0]&3)], Shadow: b[0]&0x80 != 0,
				Limit: 1 + int64(b[1]%8), Rate: 1 + int64(b[2]&7), Period: periods[b[2]>>6],
				OnStoreError: limit.FailClosed}
			byKey[keys[k]] = pols[k]
		}
		l, err := New(Config{Policies: MatcherFunc(func(key string) *limit.Policy { return byKey[key] }), Store: store})
		if err != nil {
			t.Fatal(err)
		}
		var model [len(keys)]local.State
		var admittedCost [len(keys)]int64
		calls := data[1+3*len(keys):]
		for n := 0; len(calls) >= 4 && n < 64; n++ {
			rules := 1 + int(calls[0]%4)
			step := time.Duration(calls[1]) * time.Duration(calls[2]+1) * time.Millisecond
			calls = calls[4:]
			if len(calls) < rules {
				return
			}
			if moves {
				clock.Add(int64(step))
			}
			at := now().UnixMicro()
			reqs := make([]limit.Request, rules)
			idx := make([]int, rules)
			for j := range rules {
				idx[j] = int(calls[j]&7) % len(keys)
				reqs[j] = limit.Request{Key: keys[idx[j]], Cost: 1 + int64(calls[j]>>3)%(pols[idx[j]].Limit+1)}
			}
			calls = calls[rules:]

			// The model.
			trial := model
			wantOK := true
			shadowRes := make([]limit.Result, rules)
			for j, k := range idx {
				if pols[k].Shadow {
					shadowRes[j], _, _ = local.Decide(&model[k], local.Input{Policy: pols[k], Op: limit.OpTake, Cost: reqs[j].Cost, Now: at})
					continue
				}
				res, _, err := local.Decide(&trial[k], local.Input{Policy: pols[k], Op: limit.OpTake, Cost: reqs[j].Cost, Now: at})
				if err != nil {
					t.Fatal(err)
				}
				wantOK = wantOK && res.Allowed
			}
			if wantOK {
				for j, k := range idx {
					if !pols[k].Shadow {
						local.Decide(&model[k], local.Input{Policy: pols[k], Op: limit.OpTake, Cost: reqs[j].Cost, Now: at})
					}
				}
			}

			out := make([]limit.Result, rules)
			ok, err := l.MTake(context.Background(), reqs, out)
			if err != nil {
				t.Fatalf("call %d: %v", n, err)
			}
			for j, k := range idx {
				if ok && !pols[k].Shadow {
					admittedCost[k] += reqs[j].Cost
				}
			}
			for k, key := range keys {
				if !moves && !pols[k].Shadow && admittedCost[k] > pols[k].Limit {
					t.Fatalf("call %d: %d admitted on %s of limit %d with the clock frozen", n, admittedCost[k], key, pols[k].Limit)
				}
			}
			if ok != wantOK {
				t.Fatalf("call %d %v: allowed %v, model %v; replies %+v", n, reqs, ok, wantOK, out)
			}
			for j, k := range idx {
				if !pols[k].Shadow {
					continue
				}
				r := out[j]
				if !r.Allowed || r.DecidedBy != limit.ByShadow || r.RetryAfterMs != -1 || r.Remaining != shadowRes[j].Remaining || r.Limit != shadowRes[j].Limit {
					t.Fatalf("call %d rule %d (shadow %s): %+v, model %+v", n, j, pols[k].Algorithm, r, shadowRes[j])
				}
			}
			for k, key := range keys {
				want, _, _ := local.Decide(&model[k], local.Input{Policy: pols[k], Op: limit.OpPeek, Cost: 1, Now: at})
				got := make([]limit.Result, 1)
				ls.Do(context.Background(), []limit.Request{{Key: key, Cost: 1, Op: limit.OpPeek, Policy: pols[k]}}, got)
				if got[0].Remaining != want.Remaining || got[0].Allowed != want.Allowed {
					t.Fatalf("call %d: key %s (%s, shadow %v) holds %+v, model %+v", n, key, pols[k].Algorithm, pols[k].Shadow, got[0], want)
				}
			}
		}
	})
}
