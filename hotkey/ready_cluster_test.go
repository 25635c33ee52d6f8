package hotkey

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// takeErrs counts the takes of burstOn that got an error.
var takeErrs atomic.Int64

// admission is one admitted take: sent and answered when (it was
// decided in between), and by which path.
type admission struct {
	sent, at time.Time
	split    bool
}

// takeCtx decides one take as the limiter does, under a deadline of
// timeout: through the Layer when Observe says the key is hot.
func takeCtx(h *Layer, store limit.Store, key string, p *limit.Policy, timeout time.Duration) limit.Result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req := []limit.Request{{Key: key, Cost: 1, Policy: p}}
	out := make([]limit.Result, 1)
	if h.Observe(key, p, time.Now()) {
		h.Decide(ctx, req, out)
	} else {
		store.Do(ctx, req, out)
	}
	return out[0]
}

// burstOn sends n concurrent takes of key, alternately through the two
// instances, and appends the admitted ones to adm.
func burstOn(hs [2]*Layer, stores [2]limit.Store, key string, p *limit.Policy, n int, timeout time.Duration, mu *sync.Mutex, adm *[]admission) {
	var wg sync.WaitGroup
	for j := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := time.Now()
			res := takeCtx(hs[j%2], stores[j%2], key, p, timeout)
			if res.Err != nil {
				takeErrs.Add(1)
			}
			if res.Err == nil && res.Allowed {
				mu.Lock()
				*adm = append(*adm, admission{sent: sent, at: time.Now(), split: res.DecidedBy == limit.BySplit})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// worstWindow returns the most admissions over bound in any window of a
// token bucket of limit + rate/s, with that window's count, split count
// and length. A window runs from one admission's send to another's answer
// and counts the admissions sent and answered within it, so that it only
// overstates the time they were decided in (a loaded machine delays
// answers): an excess is never the clock's.
func worstWindow(adm []admission, p *limit.Policy) (excess float64, n, split int, d time.Duration) {
	excess = -1e9
	for _, a := range adm {
		for _, b := range adm {
			w := b.at.Sub(a.sent)
			if w < 0 {
				continue
			}
			c, sc := 0, 0
			for _, x := range adm {
				if !x.sent.Before(a.sent) && !x.at.After(b.at) {
					c++
					sc += int(b2i(x.split))
				}
			}
			if e := float64(c) - float64(p.Limit) - float64(p.Rate)*w.Seconds(); e > excess {
				excess, n, split, d = e, c, sc, w
			}
		}
	}
	return excess, n, split, d
}

// The checker's hs.i69.a on a real Redis Cluster, on real time, from two
// instances under the limiter's 50 ms deadline: a new key, a burst of 20
// that drains the main bucket, 450 ms, then a burst of 72 concurrent
// takes spread over both instances, which turns the key hot on both and
// hands it over while the main bucket holds about 0.6. Many keys at once,
// so that the machine is loaded as the checker's was. No window of a
// key's admissions may hold more than limit + rate × its length.
func TestSplitHandoffTwoInstancesOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a real cluster")
	}
	t.Parallel()
	rc := redistest.NewCluster(t, localredis.Config{})
	var hs [2]*Layer
	var stores [2]limit.Store
	for i := range hs {
		st, err := cluster.New(cluster.Config{Addrs: rc.Addrs(), Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		h, err := New(Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close(context.Background()) })
		hs[i], stores[i] = h, st
	}
	p := hsPolicy()
	const rounds, keys, timeout = 3, 24, 50 * time.Millisecond
	violations, worst := 0, -1e9
	deadline := time.Now().Add(40 * time.Second)
	for r := 0; r < rounds && time.Now().Before(deadline); r++ {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for k := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("hs.t%d.r%d.k%d.a", time.Now().UnixNano(), r, k)
				var adm []admission
				var amu sync.Mutex
				burstOn(hs, stores, key, p, 20, timeout, &amu, &adm)
				time.Sleep(450 * time.Millisecond)
				burstOn(hs, stores, key, p, 72, timeout, &amu, &adm)
				time.Sleep(300 * time.Millisecond)
				burstOn(hs, stores, key, p, 20, timeout, &amu, &adm)
				excess, n, split, d := worstWindow(adm, p)
				mu.Lock()
				defer mu.Unlock()
				worst = max(worst, excess)
				if excess > 0 {
					violations++
					t.Logf("%s: admitted %d in %v (%d by split), bound %.2f", key, n, d, split, float64(p.Limit)+float64(p.Rate)*d.Seconds())
				}
			}()
		}
		wg.Wait()
	}
	s1, s2 := hs[0].Stats(), hs[1].Stats()
	t.Logf("%d keys over bound; worst excess %.2f; hand-overs %d + %d, split decisions %d + %d; %d takes got an error",
		violations, worst, s1.SplitHandoffs, s2.SplitHandoffs, s1.SplitDecisions, s2.SplitDecisions, takeErrs.Load())
	if violations > 0 {
		t.Fatalf("%d keys admitted more than limit + rate × window", violations)
	}
}
