package lua_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/algotest"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
	"github.com/sluice-rl/sluice/lua"
)

var (
	takeReceiptAt = redis.NewScript(lua.TakeReceipt.WithTestClock().Src)
	giveBackAt    = redis.NewScript(lua.GiveBack.WithTestClock().Src)
	// takeReceiptLongAt is takeReceiptAt with its receipt's PX a day longer:
	// the PX runs on Redis's own clock, not the test's, and a receipt of a
	// few ms could expire between a take and the next step (seen under
	// load). Only the expiry in the value, on the test's clock, decides.
	takeReceiptLongAt = redis.NewScript(longPX(lua.TakeReceipt.WithTestClock().Src))
)

// longPX returns src with the receipt key's PX a day longer.
func longPX(src string) string {
	const px = "'PX', life)"
	if !strings.Contains(src, px) {
		panic("lua/receipt_test.go: the take script no longer sets " + px)
	}
	return strings.Replace(src, px, "'PX', life + 86400000)", 1)
}

// receiptAt runs the receipt scripts at now: a take of cost that records
// receipt, or a give-back of -cost that names it (give), as the Redis
// store sends them (cluster/adjust.go).
func receiptAt(ctx context.Context, c redis.Scripter, key string, p *limit.Policy, cost int64, give bool, receipt string, now int64) limit.Result {
	return receiptWith(ctx, c, takeReceiptAt, key, p, cost, give, receipt, now)
}

// receiptWith is receiptAt with take as the take script.
func receiptWith(ctx context.Context, c redis.Scripter, take *redis.Script, key string, p *limit.Policy, cost int64, give bool, receipt string, now int64) limit.Result {
	a, err := lua.ArgsAt(p, time.UnixMicro(now)) // a calendar's windows are computed on sluice's clock, here the store's
	if err != nil {
		return limit.Result{Err: err}
	}
	keys := []string{key, "rcpt:" + key + ":" + receipt}
	var v []int64
	if give {
		v, err = giveBackAt.Run(ctx, c, keys, a.ID, a.Limit, a.Rate, a.Unit, -cost, p.Owner(), now/1_000_000, now%1_000_000).Int64Slice()
	} else {
		v, err = take.Run(ctx, c, keys, a.ID, a.Limit, a.Rate, a.Unit, cost, p.Owner(), limit.ReceiptLifeMs(p, 0, 0), now/1_000_000, now%1_000_000).Int64Slice()
	}
	if err != nil {
		return limit.Result{Err: err}
	}
	if len(v) != 7 {
		return limit.Result{Err: fmt.Errorf("reply %v, want 7 integers", v)}
	}
	res := result(v)
	if give {
		if err := lua.GiveBackErr(&res); err != nil {
			return limit.Result{Err: err}
		}
	} else if res.Allowed && cost > 0 {
		res.Receipt = receipt
	}
	return res
}

// The receipt vectors on the receipt scripts in a real Redis: the same
// table as the in-process store's (local/receipt_test.go).
func TestReceiptVectors(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	algotest.RunReceipts(t, algotest.Receipts, "rvec:", func(t *testing.T, key string, p *limit.Policy, cost int64, give bool, receipt string, now int64) limit.Result {
		return receiptAt(ctx, node.Client(), key, p, cost, give, receipt, now)
	}, func(t *testing.T, key, receipt string, _ int64) int64 {
		t.Helper()
		n, err := node.Client().Do(ctx, "PTTL", "rcpt:"+key+":"+receipt).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	})
}

// Random sequences of takes with receipts and give-backs (a receipt of
// the sequence, a forged one, costs up to one more than the take's, clock
// steps forward and back, now and then a change of policy) for every
// algorithm: the receipt scripts and the in-process store must agree on
// every reply and every refusal. The receipt keys' PX is a day longer
// (takeReceiptLongAt), so that only the expiry in the value (the shard's
// clock, the test's here) decides, as it does in production: the PX only
// frees the memory, on Redis's own clock.
func TestReceiptsAgreeWithGo(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	for _, alg := range limit.Algorithms {
		t.Run(string(alg), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(len(alg))))
			seen := map[string]int{}
			for seq := range 100 {
				p := randomPolicy(rng, alg)
				p.Name = "p"
				var now int64
				s := local.New(local.Config{Now: func() time.Time { return time.UnixMicro(now) }})
				key := "ragree:" + string(alg) + ":" + strconv.Itoa(seq)
				now = algotest.T0
				var ids []string
				var costs []int64
				for i := range 40 {
					now += step(rng, p)
					if rng.IntN(15) == 0 { // a change of policy: foreign receipts
						q := *p
						q.Limit = max(1, q.Limit+rng.Int64N(3)-1)
						p = &q
					}
					give := len(ids) > 0 && rng.IntN(2) == 0
					var id string
					var cost int64
					if give {
						j := rng.IntN(len(ids))
						id, cost = ids[j], -(1 + rng.Int64N(costs[j]+1))
						if rng.IntN(10) == 0 {
							id = limit.NewReceipt()
						}
					} else {
						id, cost = limit.NewReceipt(), 1+rng.Int64N(p.Limit/2+1)
						ids, costs = append(ids, id), append(costs, cost)
					}
					r := limit.Request{Key: key, Cost: cost, Policy: p, Receipt: id}
					if give {
						r.Op = limit.OpAdjust
					}
					out := make([]limit.Result, 1)
					s.Do(ctx, []limit.Request{r}, out)
					want := out[0]
					want.DecidedBy = ""
					got := receiptWith(ctx, node.Client(), takeReceiptLongAt, key, p, cost, give, id, now)
					if got.Err != want.Err || got.Err == nil && got != want {
						t.Fatalf("seq %d step %d policy %+v cost %d give %v at +%dµs: lua %+v, go %+v", seq, i, *p, cost, give, now-algotest.T0, got, want)
					}
					switch {
					case got.Err != nil:
						seen[got.Err.Error()]++
					case give:
						seen["given back"]++
					case got.Receipt != "":
						seen["receipted"]++
					}
				}
			}
			t.Logf("%s: %v", alg, seen)
			if len(seen) < 5 {
				t.Fatalf("%s: only %v: the sequences miss a case", alg, seen)
			}
		})
	}
}
