package region

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// A drain that finds the pool empty (another instance of the region spent
// it) empties the pool's estimate, so that the key stops draining and can
// be forgotten. Before (issue 20, defect 6), the estimate stayed: the key
// drained every round and wrote its board at home forever, and counted
// against MaxKeys, past which new keys are decided by the floor alone.
func TestDrainOfAnEmptyPoolForgetsIt(t *testing.T) {
	t.Parallel()
	store := func() *cluster.Store {
		s, err := cluster.New(cluster.Config{URL: "redis://" + redistest.NewSingle(t).Addr, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	l, err := New(store(), Config{Region: "eu", Home: store(), Tick: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p := &limit.Policy{Name: "g", Limit: 10, Rate: 10, Period: time.Second, OnStoreError: limit.FailClosed, Scope: limit.ScopeGlobal}
	e := l.entry("k", p)
	e.pool.Store(5) // what this instance last saw; the pool itself is empty
	l.drain(e)
	if got := e.pool.Load(); got != 0 {
		t.Fatalf("after a drain that found the pool empty, its estimate is %d, want 0", got)
	}
}
