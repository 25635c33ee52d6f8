package lua_test

import (
	"context"
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/algotest"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
	"github.com/sluice-rl/sluice/lua"
)

// FuzzLuaAgreesWithGo drives a Lua script on a real Redis and the Go code
// through the same random sequence of operations and clock steps; every
// reply must be the same. The input picks the policy (limit, rate, and a
// byte for the period and the algorithm) and then, 8 bytes a step, the op,
// the cost and the clock step.
func FuzzLuaAgreesWithGo(f *testing.F) {
	node := redistest.NewSingle(f)
	f.Add([]byte("\x05\x00\x00\x00\x32\x00\x00\x00\x02" + "\x00\x01\x00\x00\x10\x00\x00\x00"))
	f.Add([]byte("\xff\xff\x00\x00\xff\xff\xff\x00\x05" + "\x02\x40\x00\x00\x00\x00\x00\x01" + "\x03\x10\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("\x01\x00\x00\x00\x01\x00\x00\x00\x04" + "\x00\x01\x00\x00\x00\x00\x00\x00" + "\x00\x01\x00\x00\xff\xff\xff\x7f"))
	f.Add([]byte("\x0a\x00\x00\x00\x01\x00\x00\x00\x13" + "\x00\x03\x00\x00\x00\x10\x00\x00" + "\x00\x09\x00\x00\x00\x00\x10\x00"))
	f.Add([]byte("\x0a\x00\x00\x00\x01\x00\x00\x00\x23" + "\x00\x03\x00\x00\x00\x10\x00\x00" + "\x01\x09\x00\x00\x00\x00\x10\x00"))
	f.Add([]byte("\x0a\x00\x00\x00\x01\x00\x00\x00\x33" + "\x00\x0a\x00\x00\x00\x10\x00\x00" + "\x00\x09\x00\x00\x00\x00\x10\x00"))
	f.Add([]byte("\x0a\x00\x00\x00\x06\x00\x00\x00\x43" + "\x03\x07\x00\x00\x00\x10\x00\x00" + "\x00\x03\x00\x00\x00\x00\x10\x00" + "\x02\x09\x00\x00\x00\x00\x00\x00" + "\x00\x0b\x00\x00\x00\x00\x00\x00"))
	// RL.ADJUST (op 4): a take, a spend into debt, a give-back, a take
	f.Add([]byte("\x0a\x00\x00\x00\x0a\x00\x00\x00\x03" + "\x00\x0a\x00\x00\x00\x00\x00\x00" + "\x04\x0f\x00\x00\x00\x00\x00\x00" + "\x04\x03\x00\x01\x00\x10\x00\x00" + "\x00\x01\x00\x00\x00\x00\x01\x00"))
	var seq int
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 9 {
			return
		}
		p := &limit.Policy{
			Algorithm: algorithms[int(data[8]>>4)%len(algorithms)],
			Limit:     1 + int64(binary.LittleEndian.Uint32(data[0:4])%1_000_000),
			Rate:      1 + int64(binary.LittleEndian.Uint32(data[4:8])%20_000_000),
			Period:    periods[int(data[8]&15)%len(periods)],
		}
		if _, err := lua.ArgsFor(p); err != nil {
			return // refused by the config too
		}
		seq++
		key := "fuzz:" + strconv.Itoa(seq)
		ctx := context.Background()
		var st local.State
		now := algotest.T0
		steps := data[9:]
		if len(steps) > 64*8 {
			steps = steps[:64*8] // bounded work per input
		}
		for ; len(steps) >= 8; steps = steps[8:] {
			op, cost := fuzzOp(steps[0], steps[3], 1+int64(binary.LittleEndian.Uint16(steps[1:3]))%(p.Limit*2))
			now += int64(int32(binary.LittleEndian.Uint32(steps[4:8]))) // may go back: the clock is allowed to
			want, _, err := local.Decide(&st, local.Input{Policy: p, Op: op, Cost: cost, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			got := evalAt(ctx, node.Client(), key, p, cost, op, now)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if got != want {
				t.Fatalf("policy %+v op %d cost %d at +%dµs: lua %+v, go %+v", *p, op, cost, now-algotest.T0, got, want)
			}
		}
	})
}

// FuzzBatchAgreesWithGo sends random batches to the Batch script on a real
// Redis and decides the same items one at a time with the Go model: every
// item must agree. The input picks, 8 bytes an item, the key (of 5, so keys
// repeat), its algorithm (of 5, the pool too) and op, the cost and a clock
// step taken before the item's batch; a zero byte ends the batch.
func FuzzBatchAgreesWithGo(f *testing.F) {
	node := redistest.NewSingle(f)
	f.Add([]byte("\x01\x00\x05\x00\x00\x00\x00\x01" + "\x01\x00\x05\x00\x00\x00\x00\x01" + "\x11\x01\x02\x00\x00\x10\x00\x00"))
	f.Add([]byte("\x40\x03\x04\x00\x00\x00\x00\x00" + "\x40\x00\x03\x00\x00\x00\x00\x00" + "\x41\x02\x05\x00\x00\x00\x00\x00" + "\x40\x00\x01\x00\x00\x00\x00\x00"))
	f.Add([]byte("\x23\x02\x09\x00\x40\x00\x00\x00" + "\x33\x03\x01\x00\x00\x00\x00\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00" + "\x23\x00\x09\x00\x00\x00\x10\x00"))
	f.Add([]byte("\x01\x04\x06\x00\x00\x00\x00\x00" + "\x01\x04\x03\x01\x00\x00\x00\x00" + "\x31\x04\x05\x00\x00\x00\x00\x00" + "\x31\x04\x02\x01\x00\x00\x00\x00" + "\x32\x04\x02\x01\x00\x00\x00\x00"))
	var seq int
	f.Fuzz(func(t *testing.T, data []byte) {
		seq++
		ctx := context.Background()
		pols := [5]*limit.Policy{
			{Algorithm: limit.TokenBucket, Limit: 7, Rate: 3, Period: time.Second},
			{Algorithm: limit.GCRA, Limit: 5, Rate: 1_000_000, Period: time.Second},
			{Algorithm: limit.SlidingWindow, Limit: 9, Period: time.Millisecond},
			{Algorithm: limit.FixedWindow, Limit: 4, Period: time.Second},
			{Algorithm: limit.Pool, Limit: 6, Rate: 7, Period: time.Second},
		}
		var states [5]local.State
		now := algotest.T0
		if len(data) > 64*8 {
			data = data[:64*8] // bounded work per input
		}
		var items []batchItem
		var which []int
		flush := func() {
			if len(items) == 0 {
				return
			}
			agreeBatch(ctx, t, node.Client(), items, which, states[:], now, "batch")
			items, which = items[:0], which[:0]
		}
		for ; len(data) >= 8; data = data[8:] {
			if data[0] == 0 {
				flush()
				now += int64(int32(binary.LittleEndian.Uint32(data[4:8]))) // may go back
				continue
			}
			k := int(data[0]>>4) % 5
			// a key's algorithm is its policy's, or now and then another
			// one, as after a policy change
			p := pols[(k+int(data[0]&3))%5]
			op, cost := fuzzOp(data[1], data[3], 1+int64(binary.LittleEndian.Uint16(data[2:4]))%(p.Limit+2))
			items = append(items, batchItem{key: "fb:" + strconv.Itoa(seq) + ":" + strconv.Itoa(k), p: p, cost: cost, op: op})
			which = append(which, k)
		}
		flush()
	})
}
