package cluster

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// A Do whose deadline passes while its request is in flight leaves its
// items to the worker, which files the node's answer into them later; they
// must not go back to the pool for other Dos meanwhile. One pipeline slot:
// a slow command holds it, a second slow one (request A) is sent after it
// and given up on in flight, and while it is still in flight many fresh
// Dos start and queue, as many as can take pooled items. With -race, an
// item of A handed to one of them is a data race between the worker's
// filing and the new owner; without, a fresh result can be A's answer.
func TestPooledItemsNeverReachAGivenUpUnit(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	// PerKey: two keys go by their own script (the slow one for A) on a
	// node that runs functions too, where two would be batched.
	s, err := New(Config{URL: "redis://" + n.Addr, Timeout: 10 * time.Second, Pipelines: 1, PerKey: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	slow := &limit.Policy{Limit: 1, Rate: 1, Period: time.Hour}
	withScript(s, slow, testScript("spin", spinScript), 400)
	p := &limit.Policy{Limit: 1000, Rate: 1, Period: time.Hour}
	if r := takeN(ctx, s, p, "warm")[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := takeN(ctx, s, slow, "warm")[0]; r.Err != nil { // loads the spin script
		t.Fatal(r.Err)
	}
	for round := range 3 {
		p0, _ := totals(s)
		var wg sync.WaitGroup
		wg.Go(func() { takeN(ctx, s, slow, "busy") }) // holds the slot for 400ms
		waitUntil(t, 5*time.Second, "the busy pipeline never went out", func() bool { p, _ := totals(s); return p == p0+1 })
		var a []limit.Result
		aDone := make(chan struct{})
		go func() {
			defer close(aDone)
			actx, cancel := context.WithTimeout(ctx, 600*time.Millisecond) // sent at ~400ms, answered at ~800ms
			defer cancel()
			a = takeN(actx, s, slow, "a:1", "a:2") // by their own script (PerKey)
		}()
		waitUntil(t, 5*time.Second, "request A never queued", func() bool { return queued(s) == 1 })
		waitUntil(t, 5*time.Second, "request A never went out", func() bool { p, _ := totals(s); return p == p0+2 })
		<-aDone
		inFlight := func() bool { p, _ := totals(s); return p == p0+2 }()
		const fresh = 64
		out := make([][]limit.Result, fresh)
		for i := range fresh {
			wg.Go(func() {
				k := "fresh:" + strconv.Itoa(round) + ":" + strconv.Itoa(i)
				out[i] = takeN(ctx, s, p, k+":1", k+":2") // as many items as A: its slice fits
			})
		}
		wg.Wait()
		for _, r := range a {
			if !errors.Is(r.Err, limit.ErrUnavailable) {
				t.Fatalf("round %d: request A: %+v, want unavailable (its deadline passed in flight)", round, r)
			}
		}
		if !inFlight {
			t.Fatalf("round %d: request A was no longer in flight when the fresh requests started", round)
		}
		for i, rs := range out {
			for j, r := range rs {
				if r.Err != nil || !r.Allowed || r.Limit != 1000 || r.Remaining != 999 {
					t.Fatalf("round %d: fresh request %d key %d: %+v, want its own first take (limit 1000, 999 left)", round, i, j, r)
				}
			}
		}
	}
}
