package lua_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/lua"
)

// redisCPU reads used_cpu_sys + used_cpu_user of a node, in µs.
func redisCPU(ctx context.Context, tb testing.TB, c *redis.Client) float64 {
	tb.Helper()
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatal(err)
			}
			total += f * 1e6
		}
	}
	return total
}

// BenchmarkScriptCost compares what one decision costs Redis by the
// single-key script (one EVALSHA a decision, pipelined) and by Batch (one
// EVALSHA for a whole batch), uniform keys over 1,000,000, token bucket.
// The metric that matters is redis-µs/decision: Redis's own CPU, read from
// INFO cpu, divided by the decisions. Run with -benchtime 20000x or more.
func BenchmarkScriptCost(b *testing.B) {
	node := redistest.NewSingle(b)
	ctx := context.Background()
	rc := node.Client()
	p := &limit.Policy{Limit: 100, Rate: 50, Period: time.Second}
	a, err := lua.ArgsFor(p)
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range []*lua.Script{a.Script, lua.Batch} {
		if err := rc.ScriptLoad(ctx, s.Src).Err(); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range []int{1, 16, 64, 256} {
		for _, form := range []string{"single", "batch"} {
			b.Run(form+"-"+strconv.Itoa(n), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, uint64(n)))
				key := func() string { return "sluice:{user:" + strconv.Itoa(rng.IntN(1_000_000)) + "}" }
				before := redisCPU(ctx, b, rc)
				b.ResetTimer()
				for done := 0; done < b.N; done += n {
					if form == "single" {
						cmds, err := rc.Pipelined(ctx, func(pl redis.Pipeliner) error {
							for range n {
								pl.EvalSha(ctx, a.Script.SHA, []string{key()}, a.Limit, a.Rate, a.Unit, 1, 0)
							}
							return nil
						})
						if err != nil || len(cmds) != n {
							b.Fatal(err)
						}
						continue
					}
					args := make([]any, 0, 5+n*lua.BatchItemArgs)
					args = append(args, 1, a.ID, a.Limit, a.Rate, a.Unit)
					for range n {
						args = append(args, key(), 1, 1, 0)
					}
					v, err := rc.EvalSha(ctx, lua.Batch.SHA, nil, args...).Int64Slice()
					if err != nil || len(v) != 8*n {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric((redisCPU(ctx, b, rc)-before)/float64(b.N), "redis-µs/decision")
			})
		}
	}
	mem, err := rc.MemoryUsage(ctx, "sluice:{user:12345}").Result()
	if err == nil {
		b.Logf("MEMORY USAGE sluice:{user:12345} = %d bytes", mem)
	}
}
