package lua_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/algotest"
	"github.com/sluice-rl/sluice/internal/keyslot"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
	"github.com/sluice-rl/sluice/lua"
)

var clockedBatch = redis.NewScript(lua.Batch.WithTestClock().Src)

// batchItem is one decision of a Batch call.
type batchItem struct {
	key  string
	p    *limit.Policy
	cost int64
	op   limit.Op
	// from is the window a return names, or a claim's hold (lua.OpArg)
	from int64
}

// batchAt runs one Batch call at now; for each item it returns whether the
// node decided it, and the decision.
func batchAt(ctx context.Context, c redis.Scripter, items []batchItem, now int64) ([]bool, []limit.Result, error) {
	return batchSkewed(ctx, c, items, now, now)
}

// batchSkewed is batchAt with sluice's clock at sluiceNow, which a
// calendar policy's arguments are computed at.
func batchSkewed(ctx context.Context, c redis.Scripter, items []batchItem, now, sluiceNow int64) ([]bool, []limit.Result, error) {
	// the policy table, then the items
	index := map[*limit.Policy]int{}
	var pols []*limit.Policy
	for _, it := range items {
		if _, ok := index[it.p]; !ok {
			pols = append(pols, it.p)
			index[it.p] = len(pols)
		}
	}
	args := make([]any, 0, 1+4*len(pols)+len(items)*lua.BatchItemArgs+2)
	args = append(args, len(pols))
	for _, p := range pols {
		a, err := lua.ArgsAt(p, time.UnixMicro(sluiceNow))
		if err != nil {
			return nil, nil, err
		}
		args = append(args, a.ID, a.Limit, a.Rate, a.Unit)
	}
	for _, it := range items {
		cost, op := lua.ScriptOp(it.op, it.cost)
		args = append(args, it.key, index[it.p], cost, lua.OpArg(op, it.from))
	}
	args = append(args, now/1_000_000, now%1_000_000)
	v, err := runBatch(ctx, c, args).Int64Slice()
	if err != nil {
		return nil, nil, err
	}
	if len(v) != 8*len(items) {
		return nil, nil, fmt.Errorf("reply of %d integers for %d items", len(v), len(items))
	}
	served := make([]bool, len(items))
	res := make([]limit.Result, len(items))
	for i := range items {
		served[i] = v[8*i] == 1
		res[i] = result(v[8*i+1 : 8*i+8])
	}
	return served, res, nil
}

// The one table of vectors, each step a batch of one.
func TestBatchVectors(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	for _, tab := range append(algotest.Tables(), algotest.Table{Algorithm: "calendar-skew", Vectors: algotest.CalendarSkew}) {
		t.Run(string(tab.Algorithm), func(t *testing.T) {
			algotest.RunAt(t, tab.Vectors, "bvec:"+string(tab.Algorithm)+":", func(t *testing.T, key string, p *limit.Policy, cost int64, op limit.Op, now, sluiceNow int64) limit.Result {
				served, res, err := batchSkewed(ctx, node.Client(), []batchItem{{key, p, cost, op, 0}}, now, sluiceNow)
				if err != nil {
					return limit.Result{Err: err}
				}
				if !served[0] {
					return limit.Result{Err: fmt.Errorf("a single node did not serve %s", key)}
				}
				return res[0]
			}, pttl(ctx, node.Client()))
		})
	}
}

// Random batches over a few keys, so that keys repeat within a batch, of
// every algorithm and op, with clock steps between batches: each item must
// be decided as the Go model decides the same sequence one at a time.
func TestBatchAgreesWithGo(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	randomBatchesAgree(t, node.Client(), rand.New(rand.NewPCG(7, 8)), "bagree:")
}

// randomBatchesAgree sends 60 sequences of 15 random batches through c
// (the batch script, or the library by FCALL) and checks each against the
// Go model (agreeBatch).
func randomBatchesAgree(t *testing.T, c redis.Scripter, rng *rand.Rand, prefix string) {
	t.Helper()
	ctx := context.Background()
	for seq := range 60 {
		nkeys := 1 + rng.IntN(6)
		keys, pols := randomKeys(rng, prefix+strconv.Itoa(seq)+":", nkeys)
		states := make([]local.State, nkeys)
		now := algotest.T0
		for step := range 15 {
			now += stepFor(rng, pols)
			n := 1 + rng.IntN(40)
			items := make([]batchItem, n)
			which := make([]int, n)
			for i := range items {
				k := rng.IntN(nkeys)
				which[i] = k
				op, cost := randomOp(rng, 1+rng.Int64N(pols[k].Limit/2+2))
				items[i] = batchItem{key: keys[k], p: pols[k], cost: cost, op: op}
			}
			agreeBatch(ctx, t, c, items, which, states, now, fmt.Sprintf("seq %d step %d", seq, step))
		}
	}
}

// agreeBatch runs items as one Batch call at now and checks every item
// against the Go model deciding them one at a time, item i on
// states[which[i]].
func agreeBatch(ctx context.Context, t *testing.T, c redis.Scripter, items []batchItem, which []int, states []local.State, now int64, where string) {
	t.Helper()
	served, got, err := batchAt(ctx, c, items, now)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		want, _, err := local.Decide(&states[which[i]], local.Input{Policy: it.p, Op: it.op, Cost: it.cost, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if !served[i] || got[i] != want {
			t.Fatalf("%s item %d (%s %s cost %d op %d at +%dµs): served %v lua %+v, go %+v",
				where, i, it.key, it.p.Algorithm, it.cost, it.op, now-algotest.T0, served[i], got[i], want)
		}
	}
}

// stepFor draws a clock step fit for one of the policies.
func stepFor(rng *rand.Rand, pols []*limit.Policy) int64 {
	return step(rng, pols[rng.IntN(len(pols))])
}

// A key whose policy changes algorithm reads as no state under the new one
// and keeps its state for the old one until the new one writes: Lua and
// the Go model agree through random switches.
func TestAlgorithmSwitchAgreesWithGo(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	for seq := range 40 {
		key := "switch:" + strconv.Itoa(seq)
		pols := make([]*limit.Policy, len(algorithms))
		for i, alg := range algorithms {
			pols[i] = randomPolicy(rng, alg)
		}
		var st local.State
		now := algotest.T0
		for i := range 40 {
			p := pols[rng.IntN(len(pols))]
			now += step(rng, p)
			op, cost := randomOp(rng, 1+rng.Int64N(p.Limit/2+2))
			want, _, err := local.Decide(&st, local.Input{Policy: p, Op: op, Cost: cost, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if got := evalAt(ctx, node.Client(), key, p, cost, op, now); got != want {
				t.Fatalf("seq %d step %d %s cost %d op %d: lua %+v, go %+v", seq, i, p.Algorithm, cost, op, got, want)
			}
		}
	}
}

// On a real cluster one primary is sent keys of every node: it decides its
// own, marks the others without writing anything anywhere, and what it
// decides agrees with the Go model.
func TestBatchMarksKeysOfOtherNodes(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	ctx := context.Background()
	primary := c.Primaries()[0]
	owned := ownedSlots(ctx, t, primary.Client())
	p := &limit.Policy{Limit: 3, Rate: 1, Period: time.Hour}
	var items []batchItem
	mine := map[string]bool{}
	for i := range 60 {
		k := "sluice:{mark" + strconv.Itoa(i%20) + "}" // each key three times
		items = append(items, batchItem{k, p, 1, limit.OpTake, 0})
		mine[k] = owned[keyslot.Slot(k)]
	}
	if len(mine) != 20 {
		t.Fatalf("%d distinct keys, want 20", len(mine))
	}
	now := algotest.T0
	served, got, err := batchAt(ctx, primary.Client(), items, now)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]*local.State{}
	nMine := 0
	for i, it := range items {
		if served[i] != mine[it.key] {
			t.Fatalf("item %d key %s (slot %d, owned %v): served %v", i, it.key, keyslot.Slot(it.key), mine[it.key], served[i])
		}
		if !served[i] {
			continue
		}
		nMine++
		if states[it.key] == nil {
			states[it.key] = &local.State{}
		}
		want, _, _ := local.Decide(states[it.key], local.Input{Policy: p, Op: it.op, Cost: it.cost, Now: now})
		if got[i] != want {
			t.Fatalf("item %d key %s: lua %+v, go %+v", i, it.key, got[i], want)
		}
	}
	if nMine == 0 || nMine == len(items) {
		t.Fatalf("%d of %d items on the node: the test needs both kinds", nMine, len(items))
	}
	cc := c.ClusterClient()
	for k, m := range mine {
		n, err := cc.Exists(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if m != (n == 1) {
			t.Errorf("key %s owned by the node %v, exists %d: a marked key must not be written", k, m, n)
		}
	}
	t.Logf("%d of %d items decided on %s, the rest marked", nMine, len(items), primary.Addr)
}

// ownedSlots reads the slots a primary serves from CLUSTER SHARDS.
func ownedSlots(ctx context.Context, t *testing.T, c *redis.Client) map[int]bool {
	t.Helper()
	shards, err := localredis.Shards(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	self := c.Options().Addr
	owned := map[int]bool{}
	for _, sh := range shards {
		if sh.Primary != self {
			continue
		}
		for _, r := range sh.Slots {
			for s := r.Start; s <= r.End; s++ {
				owned[int(s)] = true
			}
		}
	}
	if len(owned) == 0 {
		t.Fatalf("%s owns no slot", self)
	}
	return owned
}

// State that sluice wrote as a hash (before the string layout) is read by
// its fields and replaced by a string at the next write.
func TestHashStateIsRead(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	rc := node.Client()
	p := &limit.Policy{Limit: 10, Rate: 1, Period: time.Hour}
	b, _ := p.Bucket()
	now := algotest.T0
	// 4 of 10 tokens left, written at now
	if err := rc.HSet(ctx, "old", "v", 4*b.Scale, "t", now, "s", b.Scale).Err(); err != nil {
		t.Fatal(err)
	}
	st := local.State{}
	for range 6 { // the Go model spends 6 of a fresh 10 at now: the same state
		if _, _, err := local.Decide(&st, local.Input{Policy: p, Op: limit.OpTake, Cost: 1, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		want, _, _ := local.Decide(&st, local.Input{Policy: p, Op: limit.OpTake, Cost: 1, Now: now})
		got := evalAt(ctx, rc, "old", p, 1, limit.OpTake, now)
		if got != want {
			t.Fatalf("take %d after a hash: lua %+v, go %+v", i, got, want)
		}
	}
	if typ := rc.Type(ctx, "old").Val(); typ != "string" {
		t.Fatalf("after a write the key is a %s, want a string", typ)
	}
}

// A value sluice did not write is an error, not a fresh bucket.
func TestForeignValueIsAnError(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	rc := node.Client()
	rc.Set(ctx, "foreign-s", "hello", 0)
	rc.RPush(ctx, "foreign-l", "x")
	for _, p := range []*limit.Policy{
		{Limit: 10, Rate: 1, Period: time.Hour},
		{Algorithm: limit.Pool, Limit: 10, Rate: 1, Period: time.Hour},
	} {
		for _, k := range []string{"foreign-s", "foreign-l"} {
			if r := evalAt(ctx, rc, k, p, 1, limit.OpReturn, algotest.T0); r.Err == nil {
				t.Errorf("%s %s: %+v, want a WRONGTYPE error", p.Algorithm, k, r)
			}
			served, _, err := batchAt(ctx, rc, []batchItem{{k, p, 1, limit.OpTake, 0}, {"fine", p, 1, limit.OpTake, 0}}, algotest.T0)
			if err != nil || served[0] || !served[1] {
				t.Errorf("%s %s in a batch: served %v, err %v; want it marked and the other decided", p.Algorithm, k, served, err)
			}
		}
	}
}

// A pool never had a hash: a bucket's hash under it reads as an empty
// pool, and its first write replaces the hash.
func TestHashStateIsAnEmptyPool(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	rc := node.Client()
	p := &limit.Policy{Algorithm: limit.Pool, Limit: 10, Rate: 5, Period: time.Second}
	if err := rc.HSet(ctx, "old", "v", 4, "t", algotest.T0, "s", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if got := evalAt(ctx, rc, "old", p, 1, limit.OpTake, algotest.T0); got.Err != nil || got.Allowed || got.Remaining != 0 {
		t.Fatalf("take from a hash under pool: %+v, want an empty pool", got)
	}
	if got := evalAt(ctx, rc, "old", p, 3, limit.OpReturn, algotest.T0); got.Err != nil || got.Remaining != 3 {
		t.Fatalf("fill of a hash under pool: %+v, want 3", got)
	}
	if typ := rc.Type(ctx, "old").Val(); typ != "string" {
		t.Fatalf("after a write the key is a %s, want a string", typ)
	}
}
