package lua_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
	"github.com/sluice-rl/sluice/lua"
)

// ostep is one decision of an owner test: at µs, op for cost under p; a
// return names the window of the take at index from (-1: none).
type ostep struct {
	p       *limit.Policy
	at      int64
	op      limit.Op
	cost    int64
	from    int // index of the step whose window a return names; -1 none
	allowed bool
}

// runOwner runs steps on one key, on the Lua script in a real Redis and on
// the Go model, and checks both say allowed as the step wants and agree
// on every field; then the same steps on another key, each a batch of one
// of the batch script.
func runOwner(t *testing.T, c redis.Scripter, key string, steps []ostep) {
	t.Helper()
	runOwnerSingle(t, c, key, steps)
	runOwnerBatch(t, c, key+":batch", steps)
}

func runOwnerBatch(t *testing.T, c redis.Scripter, key string, steps []ostep) {
	t.Helper()
	ctx := context.Background()
	var st local.State
	got := make([]limit.Result, len(steps))
	for i, s := range steps {
		var from int64
		if s.from >= 0 {
			from = got[s.from].Window
		}
		_, res, err := batchAt(ctx, c, []batchItem{{key: key, p: s.p, cost: s.cost, op: s.op, from: from}}, s.at)
		if err != nil {
			t.Fatalf("batch step %d: %v", i, err)
		}
		got[i] = res[0]
		want, _, err := local.Decide(&st, local.Input{Policy: s.p, Op: s.op, Cost: s.cost, Now: s.at, From: from})
		if err != nil {
			t.Fatalf("batch step %d: %v", i, err)
		}
		if got[i] != want {
			t.Fatalf("batch step %d: Lua %+v, Go %+v", i, got[i], want)
		}
	}
}

func runOwnerSingle(t *testing.T, c redis.Scripter, key string, steps []ostep) {
	t.Helper()
	ctx := context.Background()
	var st local.State
	got := make([]limit.Result, len(steps))
	for i, s := range steps {
		var from int64
		if s.from >= 0 {
			from = got[s.from].Window
		}
		a, err := lua.ArgsFor(s.p)
		if err != nil {
			t.Fatal(err)
		}
		v, err := clocked[a.ID].Run(ctx, c, []string{key}, a.Limit, a.Rate, a.Unit, s.cost, lua.OpArg(int(s.op), from), s.at/1_000_000, s.at%1_000_000).Int64Slice()
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		got[i] = result(v)
		want, _, err := local.Decide(&st, local.Input{Policy: s.p, Op: s.op, Cost: s.cost, Now: s.at, From: from})
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got[i] != want {
			t.Fatalf("step %d: Lua %+v, Go %+v", i, got[i], want)
		}
		if got[i].Allowed != s.allowed {
			t.Fatalf("step %d (op %d cost %d at %dµs from window %d): allowed %v, want %v (%+v)", i, s.op, s.cost, s.at, from, got[i].Allowed, s.allowed, got[i])
		}
	}
}

// A refund that lands after its window closed credits nothing
// (docs/architecture.md, "Keys in Redis: one owner per stored state", rule 4). Before, fixed_window
// and sliding_window gave it to whatever window was current: with 5 per
// second, a take at 0.999 s, five at 1.001 s, the refund and a take made
// six admitted in [1 s, 2 s).
func TestRefundNamesItsWindow(t *testing.T) {
	t.Parallel()
	c := redistest.NewSingle(t).Client()
	const s0 = int64(1_800_000_000) * 1_000_000 // a whole second, µs
	for _, alg := range []limit.Algorithm{limit.FixedWindow, limit.SlidingWindow} {
		p := &limit.Policy{Algorithm: alg, Limit: 5, Period: time.Second}
		t.Run(string(alg), func(t *testing.T) {
			steps := []ostep{{p, s0 + 999_000, limit.OpTake, 1, -1, true}} // an RL.MTAKE member, in window 0
			for range 5 {
				steps = append(steps, ostep{p, s0 + 1_001_000, limit.OpTake, 1, -1, alg == limit.FixedWindow})
			}
			// The refund of step 0, now in window 1, and one more take.
			steps = append(steps, ostep{p, s0 + 1_002_000, limit.OpReturn, 1, 0, true},
				ostep{p, s0 + 1_003_000, limit.OpTake, 1, -1, false})
			if alg == limit.SlidingWindow {
				// A refund to the window before lowers its count, which
				// still weighs; to an older one, nothing.
				steps = []ostep{{p, s0 + 999_000, limit.OpTake, 5, -1, true},
					{p, s0 + 1_500_000, limit.OpTake, 3, -1, false},
					{p, s0 + 1_500_000, limit.OpReturn, 5, 0, true}, // the window before: given back there
					{p, s0 + 1_500_000, limit.OpTake, 3, -1, true},
					{p, s0 + 2_500_000, limit.OpReturn, 3, 3, true}, // taken at 1.5 s, now the window before
					{p, s0 + 2_500_000, limit.OpTake, 5, -1, true},
					{p, s0 + 3_900_000, limit.OpReturn, 3, 3, true}, // taken at 1.5 s, two windows ago: nothing to give back
					{p, s0 + 3_900_000, limit.OpTake, 5, -1, false}} // window 2's 5 still weigh 10%
			}
			runOwner(t, c, "refund:"+string(alg), steps)
		})
	}
	t.Run("same window", func(t *testing.T) {
		p := &limit.Policy{Algorithm: limit.FixedWindow, Limit: 2, Period: time.Second}
		runOwner(t, c, "refund:same", []ostep{
			{p, s0 + 100_000, limit.OpTake, 2, -1, true},
			{p, s0 + 200_000, limit.OpTake, 1, -1, false},
			{p, s0 + 300_000, limit.OpReturn, 2, 0, true},
			{p, s0 + 400_000, limit.OpTake, 2, -1, true},
		})
	})
}

// A state written by another algorithm is never read as a fresh, full
// bucket (rule 3): a key whose policy changes algorithm reads as spent
// until the old state's TTL ends. Before, it read as no state: full.
func TestForeignOwnerIsNotFull(t *testing.T) {
	t.Parallel()
	c := redistest.NewSingle(t).Client()
	const s0 = int64(1_800_000_000) * 1_000_000
	pols := []*limit.Policy{
		{Algorithm: limit.TokenBucket, Limit: 5, Rate: 5, Period: time.Minute},
		{Algorithm: limit.GCRA, Limit: 5, Rate: 5, Period: time.Minute},
		{Algorithm: limit.SlidingWindow, Limit: 5, Period: time.Minute},
		{Algorithm: limit.FixedWindow, Limit: 5, Period: time.Minute},
	}
	for i, a := range pols {
		for j, b := range pols {
			if kindWindow(a) && kindWindow(b) || i == j {
				continue // the windows share their state; the same one reads its own
			}
			key := "foreign:" + string(a.Algorithm) + ":" + string(b.Algorithm)
			runOwner(t, c, key, []ostep{
				{a, s0 + 1_000, limit.OpTake, 5, -1, true},
				{b, s0 + 2_000, limit.OpTake, 1, -1, false},
				{b, s0 + 3_000, limit.OpPeek, 1, -1, false},
			})
		}
	}
}

func kindWindow(p *limit.Policy) bool { return !p.Algorithm.IsBucket() }

// A claim that holds a bucket (a split hot key's main bucket) takes what
// there is and lets nothing refill until the hold ends: no other path (an
// RL.MTAKE, an instance where the key is not hot) spends the budget the
// sub-buckets hold meanwhile. The reply's 7th value is the hold already in
// force, so an instance tells a hot spell it joins from one it starts.
func TestHoldLetsNothingRefill(t *testing.T) {
	t.Parallel()
	c := redistest.NewSingle(t).Client()
	ctx := context.Background()
	const s0 = int64(1_800_000_000) * 1_000_000
	for _, alg := range []limit.Algorithm{limit.TokenBucket, limit.GCRA} {
		p := &limit.Policy{Algorithm: alg, Limit: 5, Rate: 5, Period: time.Second}
		a, err := lua.ArgsFor(p)
		if err != nil {
			t.Fatal(err)
		}
		key := "hold:" + string(alg)
		var st, stb local.State
		do := func(at int64, op limit.Op, cost, hold int64) limit.Result {
			t.Helper()
			v, err := clocked[a.ID].Run(ctx, c, []string{key}, a.Limit, a.Rate, a.Unit, cost, lua.OpArg(int(op), hold), at/1_000_000, at%1_000_000).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			got := result(v)
			want, _, err := local.Decide(&st, local.Input{Policy: p, Op: op, Cost: cost, Now: at, From: hold})
			if err != nil || got != want {
				t.Fatalf("%s at %d op %d: Lua %+v, Go %+v %v", alg, at-s0, op, got, want, err)
			}
			// the same on another key by the batch script
			_, res, err := batchAt(ctx, c, []batchItem{{key: key + ":batch", p: p, cost: cost, op: op, from: hold}}, at)
			if err != nil {
				t.Fatal(err)
			}
			want, _, err = local.Decide(&stb, local.Input{Policy: p, Op: op, Cost: cost, Now: at, From: hold})
			if err != nil || res[0] != want {
				t.Fatalf("%s at %d op %d by the batch script: Lua %+v, Go %+v %v", alg, at-s0, op, res[0], want, err)
			}
			return got
		}
		if r := do(s0, limit.OpTake, 2, 0); !r.Allowed {
			t.Fatalf("%s: first take refused: %+v", alg, r)
		}
		if r := do(s0+1, limit.OpClaim, 5, s0+3_000_000); r.Granted != 3 || r.Window != 0 {
			t.Fatalf("%s: the claim that starts a hold: %+v, want 3 granted and no hold before", alg, r)
		}
		if r := do(s0+1_000_000, limit.OpClaim, 5, s0+5_000_000); r.Granted != 0 || r.Window != s0+3_000_000 {
			t.Fatalf("%s: a claim that would start a hold under one: %+v, want nothing granted and the hold in force", alg, r)
		}
		if r := do(s0+2_900_000, limit.OpTake, 1, 0); r.Allowed {
			t.Fatalf("%s: a take 2.9 s into a hold to 3 s was admitted: %+v", alg, r)
		}
		if r := do(s0+3_500_000, limit.OpTake, 2, 0); !r.Allowed || r.Remaining != 0 {
			t.Fatalf("%s: 0.5 s after the hold (not extended by the second claim), 2.5 tokens: %+v", alg, r)
		}
		// A negative hold extends (or starts) one; a hold of 1 only asks.
		if r := do(s0+3_600_000, limit.OpClaim, 5, -(s0 + 6_000_000)); r.Window != 0 {
			t.Fatalf("%s: an extension after the hold ended: %+v, want no hold in force before", alg, r)
		}
		if r := do(s0+5_000_000, limit.OpClaim, 5, -(s0 + 7_000_000)); r.Granted != 0 || r.Window != s0+6_000_000 {
			t.Fatalf("%s: an extension under the hold: %+v", alg, r)
		}
		if r := do(s0+6_900_000, limit.OpClaim, 0, 1); r.Window != s0+7_000_000 {
			t.Fatalf("%s: asking for the hold: %+v, want the extended one", alg, r)
		}
		if r := do(s0+6_950_000, limit.OpTake, 1, 0); r.Allowed {
			t.Fatalf("%s: a take under the extended hold was admitted: %+v", alg, r)
		}
	}
}
