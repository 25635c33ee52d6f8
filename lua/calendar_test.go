package lua_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
	_ "time/tzdata"

	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
	"github.com/sluice-rl/sluice/lua"
)

// calendarZones are zones with and without daylight saving, one of them
// with a half-hour offset.
var calendarZones = []string{"UTC", "America/New_York", "Europe/Berlin", "Australia/Sydney", "Asia/Kolkata", "Australia/Lord_Howe"}

// calendarStarts are instants near the clock changes of 2024 and ends of
// months and years, where the random walks start.
var calendarStarts = []string{"2024-03-10T06:00:00Z", "2024-10-27T00:30:00Z", "2024-04-06T15:00:00Z", "2024-02-28T22:00:00Z", "2024-12-31T18:00:00Z", "2023-02-28T23:59:00Z"}

// randomCalendar draws a calendar policy, or now and then a 1-day
// fixed_window, the policy a calendar often replaces.
func randomCalendar(t *testing.T, rng *rand.Rand) *limit.Policy {
	if rng.IntN(6) == 0 {
		return &limit.Policy{Algorithm: limit.FixedWindow, Limit: 1 + rng.Int64N(20), Period: 24 * time.Hour}
	}
	loc, err := time.LoadLocation(calendarZones[rng.IntN(len(calendarZones))])
	if err != nil {
		t.Fatal(err)
	}
	return &limit.Policy{Algorithm: limit.FixedWindow, Limit: 1 + rng.Int64N(20), Calendar: limit.Calendars[rng.IntN(len(limit.Calendars))], Zone: loc}
}

// calendarStep draws a clock step: small, about an hour, about a day, or
// back; and sluice's skew from the store, up to a day either way.
func calendarStep(rng *rand.Rand) (step, skew int64) {
	switch rng.IntN(5) {
	case 0:
		step = rng.Int64N(2_000_000)
	case 1:
		step = rng.Int64N(3600_000_000)
	case 2:
		step = rng.Int64N(2 * 86400_000_000)
	case 3:
		step = -rng.Int64N(2_000_000)
	}
	if rng.IntN(3) == 0 {
		skew = rng.Int64N(2*86400_000_000) - 86400_000_000
	}
	return step, skew
}

// Random walks across clock changes and month ends, through every op,
// switches between calendars, zones and a fixed_window, and skews between
// sluice's clock and the store's: the single-key script, the batch script
// and the Go model must agree on every reply.
func TestCalendarAgreesWithGo(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(23, 3))
	for seq := range 120 {
		start, err := time.Parse(time.RFC3339, calendarStarts[rng.IntN(len(calendarStarts))])
		if err != nil {
			t.Fatal(err)
		}
		now := start.UnixMicro()
		p := randomCalendar(t, rng)
		key := "cagree:" + strconv.Itoa(seq)
		var st, bst local.State
		for i := range 40 {
			step, skew := calendarStep(rng)
			now += step
			if rng.IntN(8) == 0 {
				p = randomCalendar(t, rng)
			}
			cost := 1 + rng.Int64N(p.Limit+2)
			op := limit.Op(rng.IntN(4))
			where := fmt.Sprintf("seq %d step %d (%s %s in %v, cost %d op %d at %s, sluice %+dµs)", seq, i, p.Algorithm, p.Calendar, p.Zone, cost, op, time.UnixMicro(now).UTC().Format(time.RFC3339Nano), skew)
			want, _, err := local.Decide(&st, local.Input{Policy: p, Op: op, Cost: cost, Now: now, SluiceNow: now + skew})
			if err != nil {
				t.Fatal(err)
			}
			if got := evalSkewed(ctx, node.Client(), key, p, cost, op, now, now+skew); got != want {
				t.Fatalf("%s: lua %+v, go %+v", where, got, want)
			}
			want, _, _ = local.Decide(&bst, local.Input{Policy: p, Op: op, Cost: cost, Now: now, SluiceNow: now + skew})
			served, got, err := batchSkewed(ctx, node.Client(), []batchItem{{"b" + key, p, cost, op, 0}}, now, now+skew)
			if err != nil {
				t.Fatal(err)
			}
			if !served[0] || got[0] != want {
				t.Fatalf("%s: batch served %v %+v, go %+v", where, served[0], got[0], want)
			}
		}
	}
}

// A return names the window by the end its take reported: to that window
// it gives back, to an earlier one nothing.
func TestCalendarReturnNamesItsWindow(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	p := &limit.Policy{Algorithm: limit.FixedWindow, Limit: 3, Calendar: limit.CalendarDay, Zone: time.UTC}
	day := time.Date(2024, 7, 1, 12, 0, 0, 0, time.UTC).UnixMicro()
	eval := func(cost int64, op limit.Op, from, now int64) limit.Result {
		t.Helper()
		a, err := lua.ArgsAt(p, time.UnixMicro(now))
		if err != nil {
			t.Fatal(err)
		}
		v, err := clocked[a.ID].Run(ctx, node.Client(), []string{"cret"}, a.Limit, a.Rate, a.Unit, cost, lua.OpArg(int(op), from), now/1_000_000, now%1_000_000).Int64Slice()
		if err != nil || len(v) != 7 {
			t.Fatalf("reply %v, %v", v, err)
		}
		return result(v)
	}
	taken := eval(2, limit.OpTake, 0, day)
	if end := time.Date(2024, 7, 2, 0, 0, 0, 0, time.UTC).UnixMicro(); taken.Window != end {
		t.Fatalf("window %d, want its end %d", taken.Window, end)
	}
	if got := eval(1, limit.OpReturn, taken.Window, day+1); got.Remaining != 2 {
		t.Fatalf("a return to its own window: remaining %d, want 2", got.Remaining)
	}
	next := day + 86400_000_000
	eval(3, limit.OpTake, 0, next)
	if got := eval(1, limit.OpReturn, taken.Window, next); got.Remaining != 0 {
		t.Fatalf("a return to yesterday's window gave back: remaining %d, want 0", got.Remaining)
	}
}

// The multi-key script decides a calendar key beside a bucket all or
// nothing, as the Go model does, across Berlin's midnight.
func TestCalendarMultiAgreesWithGo(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	pols := []*limit.Policy{
		{Algorithm: limit.FixedWindow, Limit: 5, Calendar: limit.CalendarDay, Zone: berlin},
		{Algorithm: limit.TokenBucket, Limit: 4, Rate: 1, Period: time.Minute},
	}
	keys := []string{"{cm}:day", "{cm}:bucket"}
	states := make([]local.State, len(pols))
	rng := rand.New(rand.NewPCG(9, 9))
	now := time.Date(2024, 10, 27, 23, 58, 0, 0, berlin).UnixMicro()
	for i := range 60 {
		now += rng.Int64N(10_000_000)
		args := []any{}
		costs := make([]int64, len(pols))
		for j, p := range pols {
			a, err := lua.ArgsAt(p, time.UnixMicro(now))
			if err != nil {
				t.Fatal(err)
			}
			costs[j] = 1 + rng.Int64N(3)
			args = append(args, a.ID, a.Limit, a.Rate, a.Unit, costs[j])
		}
		args = append(args, now/1_000_000, now%1_000_000)
		v, err := clocked[0].Run(ctx, node.Client(), keys, args...).Int64Slice()
		if err != nil || len(v) != 1+7*len(pols) {
			t.Fatalf("step %d: reply %v, %v", i, v, err)
		}
		ok := true
		want := make([]limit.Result, len(pols))
		for j := range pols {
			want[j], _, _ = local.Decide(&states[j], local.Input{Policy: pols[j], Op: limit.OpPeek, Cost: costs[j], Now: now})
			ok = ok && want[j].Allowed
		}
		if ok {
			for j := range pols {
				want[j], _, _ = local.Decide(&states[j], local.Input{Policy: pols[j], Op: limit.OpTake, Cost: costs[j], Now: now})
			}
		}
		if (v[0] == 1) != ok {
			t.Fatalf("step %d: lua allowed=%d, go %v", i, v[0], ok)
		}
		for j := range pols {
			if got := result(v[1+7*j : 8+7*j]); got != want[j] {
				t.Fatalf("step %d key %s: lua %+v, go %+v", i, keys[j], got, want[j])
			}
		}
	}
}

// FuzzCalendarAgreesWithGo drives the calendar script on a real Redis and
// the Go model through the same random steps: the input picks the zone,
// the unit and the limit (3 bytes), a start near a clock change (1 byte),
// then, 8 bytes a step, the op, the cost, the clock step (which may go
// back) and sluice's skew from the store's clock (up to a day either way).
func FuzzCalendarAgreesWithGo(f *testing.F) {
	node := redistest.NewSingle(f)
	f.Add([]byte("\x01\x00\x03\x00" + "\x00\x01\x00\x00\x10\x00\x00\x00" + "\x00\x02\x00\x7f\xff\xff\xff\x00"))
	f.Add([]byte("\x02\x03\x05\x04" + "\x02\x09\x00\x00\x00\x10\x00\x00" + "\x03\x01\x80\x00\x00\x00\x10\x00"))
	var seq int
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 4 {
			return
		}
		loc, err := time.LoadLocation(calendarZones[int(data[0])%len(calendarZones)])
		if err != nil {
			t.Fatal(err)
		}
		p := &limit.Policy{Algorithm: limit.FixedWindow, Calendar: limit.Calendars[int(data[1])%len(limit.Calendars)], Zone: loc, Limit: 1 + int64(data[2])}
		start, err := time.Parse(time.RFC3339, calendarStarts[int(data[3])%len(calendarStarts)])
		if err != nil {
			t.Fatal(err)
		}
		seq++
		key := "cfuzz:" + strconv.Itoa(seq)
		ctx := context.Background()
		var st local.State
		now := start.UnixMicro()
		steps := data[4:]
		if len(steps) > 64*8 {
			steps = steps[:64*8] // bounded work per input
		}
		for ; len(steps) >= 8; steps = steps[8:] {
			op := limit.Op(steps[0] & 3)
			cost := 1 + int64(steps[1])%(p.Limit+2)
			now += int64(int32(uint32(steps[2])|uint32(steps[3])<<8|uint32(steps[4])<<16|uint32(steps[5])<<24)) * 40 // ±1 day
			skew := int64(int16(uint16(steps[6])|uint16(steps[7])<<8)) * 2_640_000_000 / 1000                        // ±1 day
			want, _, err := local.Decide(&st, local.Input{Policy: p, Op: op, Cost: cost, Now: now, SluiceNow: now + skew})
			if err != nil {
				t.Fatal(err)
			}
			if got := evalSkewed(ctx, node.Client(), key, p, cost, op, now, now+skew); got != want {
				t.Fatalf("%s %s in %s, op %d cost %d at %s, sluice %+dµs: lua %+v, go %+v", p.Algorithm, p.Calendar, loc, op, cost,
					time.UnixMicro(now).UTC().Format(time.RFC3339Nano), skew, got, want)
			}
		}
	})
}
