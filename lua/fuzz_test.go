package lua_test

import (
	"context"
	"encoding/binary"
	"strconv"
	"testing"

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
	var seq int
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 9 {
			return
		}
		p := &limit.Policy{
			Algorithm: limit.Algorithms[int(data[8]>>4)%len(limit.Algorithms)],
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
			op := limit.Op(steps[0] & 3)
			cost := 1 + int64(binary.LittleEndian.Uint16(steps[1:3]))%(p.Limit*2)
			now += int64(int32(binary.LittleEndian.Uint32(steps[4:8]))) // may go back: the clock is allowed to
			want, _, err := local.Decide(&st, p, cost, now, op)
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
