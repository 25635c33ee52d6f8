package lua_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/algotest"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/lua"
)

var (
	takeReceiptAt = redis.NewScript(lua.TakeReceipt.WithTestClock().Src)
	giveBackAt    = redis.NewScript(lua.GiveBack.WithTestClock().Src)
)

// receiptAt runs the receipt scripts at now: a take of cost that records
// receipt, or a give-back of -cost that names it (give), as the Redis
// store sends them (cluster/adjust.go).
func receiptAt(ctx context.Context, c redis.Scripter, key string, p *limit.Policy, cost int64, give bool, receipt string, now int64) limit.Result {
	a, err := lua.ArgsAt(p, time.UnixMicro(now)) // a calendar's windows are computed on sluice's clock, here the store's
	if err != nil {
		return limit.Result{Err: err}
	}
	keys := []string{key, "rcpt:" + key + ":" + receipt}
	var v []int64
	if give {
		v, err = giveBackAt.Run(ctx, c, keys, a.ID, a.A[0], a.A[1], a.A[2], -cost, p.Owner(), now/1_000_000, now%1_000_000).Int64Slice()
	} else {
		v, err = takeReceiptAt.Run(ctx, c, keys, a.ID, a.A[0], a.A[1], a.A[2], cost, p.Owner(), limit.ReceiptLifeMs(p, 0, 0), now/1_000_000, now%1_000_000).Int64Slice()
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
