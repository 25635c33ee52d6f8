package lua_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/algotest"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/lua"
)

var clockedLib = lua.BatchLibrary.WithTestClock()

// viaFunction is a node's client whose batches (batchSkewed) go by FCALL
// of the test-clock library, loaded on the node's "Function not found"
// as the store does, instead of by EVALSHA of the batch script.
type viaFunction struct{ *redis.Client }

// runBatch runs one batch call of args on c: by FCALL when c is a
// viaFunction, else by the batch script.
func runBatch(ctx context.Context, c redis.Scripter, args []any) *redis.Cmd {
	f, ok := c.(viaFunction)
	if !ok {
		return clockedBatch.Run(ctx, c, nil, args...)
	}
	call := append([]any{"fcall", clockedLib.Func, 0}, args...)
	cmd := f.Do(ctx, call...)
	if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "ERR Function not found") {
		if err := f.Do(ctx, "function", "load", "replace", clockedLib.Src).Err(); err != nil {
			return redis.NewCmdResult(nil, err)
		}
		cmd = f.Do(ctx, call...)
	}
	return cmd
}

// The one table of vectors, each step a batch of one, through the library.
func TestLibraryVectors(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	fc := viaFunction{node.Client()}
	for _, tab := range append(algotest.Tables(), algotest.Table{Algorithm: "calendar-skew", Vectors: algotest.CalendarSkew}) {
		t.Run(string(tab.Algorithm), func(t *testing.T) {
			algotest.RunAt(t, tab.Vectors, "fvec:"+string(tab.Algorithm)+":", func(t *testing.T, key string, p *limit.Policy, cost int64, op limit.Op, now, sluiceNow int64) limit.Result {
				served, res, err := batchSkewed(ctx, fc, []batchItem{{key: key, p: p, cost: cost, op: op}}, now, sluiceNow)
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
	assertFunctionRan(ctx, t, node.Client())
}

// Random batches through the library, as TestBatchAgreesWithGo through the
// script: each item decided as the Go model decides the sequence.
func TestLibraryAgreesWithGo(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	randomBatchesAgree(t, viaFunction{node.Client()}, rand.New(rand.NewPCG(17, 18)), "fagree:")
	assertFunctionRan(context.Background(), t, node.Client())
}

// assertFunctionRan fails unless the node ran the test library's function
// and never the batch script: the test went the way it says.
func assertFunctionRan(ctx context.Context, t *testing.T, c *redis.Client) {
	t.Helper()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "cmdstat_fcall:") {
		t.Errorf("no FCALL in the node's commandstats:\n%s", info)
	}
	if strings.Contains(info, "cmdstat_evalsha:") || strings.Contains(info, "cmdstat_eval:") {
		t.Errorf("the node ran scripts; the test must go by the library:\n%s", info)
	}
}

// The library loads on a real Redis under its hashed name, registers one
// function that may write (no no-writes flag) and take keys of any slot,
// loads again with REPLACE without an error (a second sluice, a second
// worker), and its test-clock twin has a name of its own.
func TestLibraryLoads(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	ctx := context.Background()
	c := node.Client()
	lib := lua.BatchLibrary
	if !strings.HasPrefix(lib.Func, lib.Name+"_") || lib.Name == clockedLib.Name || lib.Func == clockedLib.Func {
		t.Fatalf("names: %s %s, test clock %s %s", lib.Name, lib.Func, clockedLib.Name, clockedLib.Func)
	}
	for i := range 2 {
		got, err := c.Do(ctx, "function", "load", "replace", lib.Src).Text()
		if err != nil || got != lib.Name {
			t.Fatalf("load %d: %q %v, want %q", i, got, err, lib.Name)
		}
	}
	libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: lib.Name}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) != 1 || len(libs[0].Functions) != 1 {
		t.Fatalf("FUNCTION LIST: %+v", libs)
	}
	f := libs[0].Functions[0]
	if f.Name != lib.Func || strings.Join(f.Flags, ",") != "allow-cross-slot-keys" {
		t.Errorf("function %s flags %v, want %s with allow-cross-slot-keys alone", f.Name, f.Flags, lib.Func)
	}
	// One call through the real clock: a fresh key of a 5-token bucket.
	p := &limit.Policy{Limit: 5, Rate: 1, Period: time.Second}
	a, err := lua.ArgsAt(p, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Do(ctx, "fcall", lib.Func, 0, 1, a.ID, a.Limit, a.Rate, a.Unit, "sluice:{load}", 1, 1, 0).Int64Slice()
	if err != nil || len(v) != 8 || v[0] != 1 || v[1] != 1 || v[3] != 4 {
		t.Fatalf("FCALL: %v %v, want served, allowed, 4 left", v, err)
	}
}
