package lua_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/algotest"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
	"github.com/sluice-rl/sluice/lua"
)

// clocked are the scripts with their clock read from the last two
// arguments instead of TIME (the one change), so that tests step time
// exactly on a real Redis.
var clocked = map[int]*redis.Script{}

func init() {
	for id := lua.IDTokenBucket; id <= lua.IDCalendar; id++ {
		clocked[id] = redis.NewScript(lua.For(id).WithTestClock().Src)
	}
	clocked[0] = redis.NewScript(lua.Multi.WithTestClock().Src)
}

// evalAt decides op for cost on key under p at now with p's script.
func evalAt(ctx context.Context, c redis.Scripter, key string, p *limit.Policy, cost int64, op limit.Op, now int64) limit.Result {
	return evalSkewed(ctx, c, key, p, cost, op, now, now)
}

// evalSkewed is evalAt with sluice's clock at sluiceNow, which a calendar
// policy's arguments are computed at.
func evalSkewed(ctx context.Context, c redis.Scripter, key string, p *limit.Policy, cost int64, op limit.Op, now, sluiceNow int64) limit.Result {
	a, err := lua.ArgsAt(p, time.UnixMicro(sluiceNow))
	if err != nil {
		return limit.Result{Err: err}
	}
	cost, o := lua.ScriptOp(op, cost)
	v, err := clocked[a.ID].Run(ctx, c, []string{key}, a.Limit, a.Rate, a.Unit, cost, o, now/1_000_000, now%1_000_000).Int64Slice()
	if err != nil {
		return limit.Result{Err: err}
	}
	if len(v) != 7 {
		return limit.Result{Err: fmt.Errorf("reply %v, want 7 integers", v)}
	}
	return result(v)
}

// algorithms is every algorithm the scripts decide: the four a config
// names, and the internal pool.
var algorithms = append(slices.Clone(limit.Algorithms), limit.Pool)

// pttl is the TTL of key in ms, as algotest.TTL wants it.
func pttl(ctx context.Context, c *redis.Client) algotest.TTL {
	return func(t *testing.T, key string, _ int64) int64 {
		t.Helper()
		n, err := c.Do(ctx, "PTTL", key).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}

func result(v []int64) limit.Result {
	return limit.Result{Allowed: v[0] == 1, Limit: v[1], Remaining: v[2], RetryAfterMs: v[3], ResetAfterMs: v[4], Granted: v[5], Window: v[6]}
}

// The one table of vectors, on every Lua script in a real Redis.
func TestVectors(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	tables := append(algotest.Tables(), algotest.Table{Algorithm: "calendar-skew", Vectors: algotest.CalendarSkew})
	v, s := algotest.Count(tables)
	t.Logf("%d vectors, %d steps", v, s)
	for _, tab := range tables {
		t.Run(string(tab.Algorithm), func(t *testing.T) {
			if len(tab.Vectors) == 0 {
				t.Fatalf("no vectors for %s", tab.Algorithm)
			}
			algotest.RunAt(t, tab.Vectors, "vec:"+string(tab.Algorithm)+":", func(t *testing.T, key string, p *limit.Policy, cost int64, op limit.Op, now, sluiceNow int64) limit.Result {
				return evalSkewed(ctx, node.Client(), key, p, cost, op, now, sluiceNow)
			}, pttl(ctx, node.Client()))
		})
	}
}

var periods = []time.Duration{time.Microsecond, 7 * time.Microsecond, time.Millisecond, time.Second, time.Minute, time.Hour, 24 * time.Hour}

// randomPolicy draws a policy of algorithm alg that the config accepts.
func randomPolicy(rng *rand.Rand, alg limit.Algorithm) *limit.Policy {
	for {
		p := &limit.Policy{
			Algorithm: alg,
			Limit:     1 + rng.Int64N(1000),
			Rate:      1 + rng.Int64N(2_000_000),
			Period:    periods[rng.IntN(len(periods))],
		}
		if _, err := lua.ArgsFor(p); err == nil {
			return p
		}
	}
}

// step draws a clock step: small, within a period, a long gap, or back.
func step(rng *rand.Rand, p *limit.Policy) int64 {
	switch rng.IntN(5) {
	case 0:
		return rng.Int64N(1000)
	case 1:
		return rng.Int64N(int64(p.Period/time.Microsecond) + 1)
	case 2:
		return -rng.Int64N(100) // a clock step back
	case 3:
		return 2*int64(p.Period/time.Microsecond) + rng.Int64N(1000)
	}
	return 0
}

// Random sequences of every op and clock steps, for every algorithm: Lua
// and Go must agree on every reply, and so on the state they leave.
func TestLuaAgreesWithGo(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(alg))))
			for seq := range 150 {
				p := randomPolicy(rng, alg)
				key := "agree:" + string(alg) + ":" + strconv.Itoa(seq)
				var st local.State
				now := algotest.T0
				for i := range 30 {
					now += step(rng, p)
					cost := 1 + rng.Int64N(p.Limit+p.Limit/10+1)
					op, cost := randomOp(rng, cost)
					want, _, err := local.Decide(&st, local.Input{Policy: p, Op: op, Cost: cost, Now: now})
					if err != nil {
						t.Fatal(err)
					}
					got := evalAt(ctx, node.Client(), key, p, cost, op, now)
					if got != want {
						t.Fatalf("seq %d step %d policy %+v cost %d op %d at +%dµs: lua %+v, go %+v", seq, i, *p, cost, op, now-algotest.T0, got, want)
					}
				}
			}
		})
	}
}

// randomKeys names n keys prefix0, prefix1, … and draws each a policy of
// any algorithm.
func randomKeys(rng *rand.Rand, prefix string, n int) ([]string, []*limit.Policy) {
	keys := make([]string, n)
	pols := make([]*limit.Policy, n)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
		pols[i] = randomPolicy(rng, algorithms[rng.IntN(len(algorithms))])
	}
	return keys, pols
}

// The multi-key script against the Go model of it: peek every key, and
// take every key only when every peek allows. Pools are filled between
// calls, by the single-key script and the Go model alike.
func TestMultiAgreesWithGo(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	for seq := range 100 {
		n := 1 + rng.IntN(4)
		keys, pols := randomKeys(rng, "{multi"+strconv.Itoa(seq)+"}:", n)
		states := make([]local.State, n)
		now := algotest.T0
		for i := range 20 {
			now += step(rng, pols[0])
			for j, p := range pols {
				// a pool is empty until filled: fill now and then, on both
				if p.Algorithm != limit.Pool || rng.IntN(2) == 0 {
					continue
				}
				cost := 1 + rng.Int64N(p.Limit)
				want, _, _ := local.Decide(&states[j], local.Input{Policy: p, Op: limit.OpReturn, Cost: cost, Now: now})
				if got := evalAt(ctx, node.Client(), keys[j], p, cost, limit.OpReturn, now); got != want {
					t.Fatalf("seq %d step %d fill of key %d: lua %+v, go %+v", seq, i, j, got, want)
				}
			}
			args := []any{}
			costs := make([]int64, n)
			for j, p := range pols {
				a, _ := lua.ArgsFor(p)
				costs[j] = 1 + rng.Int64N(p.Limit/2+1)
				args = append(args, a.ID, a.Limit, a.Rate, a.Unit, costs[j])
			}
			args = append(args, now/1_000_000, now%1_000_000)
			v, err := clocked[0].Run(ctx, node.Client(), keys, args...).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			if len(v) != 1+7*n {
				t.Fatalf("reply of %d integers, want %d", len(v), 1+7*n)
			}
			ok := true
			want := make([]limit.Result, n)
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
				t.Fatalf("seq %d step %d: lua allowed=%d, go %v", seq, i, v[0], ok)
			}
			for j := range pols {
				if got := result(v[1+7*j : 8+7*j]); got != want[j] {
					t.Fatalf("seq %d step %d key %d (%s): lua %+v, go %+v", seq, i, j, pols[j].Algorithm, got, want[j])
				}
			}
		}
	}
}

// A key named twice in one multi call: the second take fails, and the
// first is given back.
func TestMultiSameKeyTwice(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	p := &limit.Policy{Algorithm: limit.TokenBucket, Limit: 5, Rate: 1, Period: time.Hour}
	a, _ := lua.ArgsFor(p)
	now := algotest.T0
	args := []any{a.ID, a.Limit, a.Rate, a.Unit, 3, a.ID, a.Limit, a.Rate, a.Unit, 3, now / 1_000_000, now % 1_000_000}
	v, err := clocked[0].Run(ctx, node.Client(), []string{"twice", "twice"}, args...).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	if v[0] != 0 {
		t.Fatalf("3 + 3 of 5 tokens admitted: %v", v)
	}
	got := evalAt(ctx, node.Client(), "twice", p, 1, limit.OpPeek, now)
	if got.Remaining != 5 {
		t.Fatalf("after the refused pair the bucket holds %d, want 5", got.Remaining)
	}
}
