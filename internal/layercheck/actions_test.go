package layercheck

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"pgregory.net/rapid"
)

func (it *iteration) mtake(t *rapid.T, ctx context.Context) {
	w := it.w
	_, p := w.pick(t)
	var keys []string
	switch rapid.IntRange(0, 2).Draw(t, "mtake.shape") {
	case 0: // one slot: one hash tag
		for j := range rapid.IntRange(2, 3).Draw(t, "mtake.n") {
			fam := rapid.SampledFrom(families).Draw(t, fmt.Sprintf("m%d.family", j))
			keys = append(keys, it.spell(it.base(fam, "a"), 2))
		}
	case 1: // k and {k}: one slot, one Redis key today
		b := it.drawKey(t, "mtake.k")
		keys = []string{b, it.spell(b, 1)}
	default: // anywhere
		for j := range rapid.IntRange(2, 3).Draw(t, "mtake.n") {
			keys = append(keys, it.drawKey(t, fmt.Sprintf("m%d", j)))
		}
	}
	seen := map[string]bool{}
	args := []any{"RL.MTAKE"}
	var ks []string
	var costs []int64
	for j, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		c := int64(rapid.SampledFrom([]int{1, 1, 1, 2, 40}).Draw(t, fmt.Sprintf("m%d.cost", j))) // 40: this member refuses
		ks, costs = append(ks, k), append(costs, c)
		args = append(args, k, c)
	}
	sent := time.Now()
	v, err := p.rc.Do(ctx, args...).Slice()
	recv := time.Now()
	if err != nil {
		it.opError(t, p, sent, recv, err, "RL.MTAKE %v", args[1:])
		return
	}
	if len(v) != 2 {
		t.Fatalf("RL.MTAKE %v -> %v: want [allowed, [replies]]", args[1:], v)
	}
	all, _ := v[0].(int64)
	rs, ok := v[1].([]any)
	if !ok || len(rs) != len(ks) {
		t.Fatalf("RL.MTAKE %v -> %v: want %d replies", args[1:], v, len(ks))
	}
	var out []string
	for j, x := range rs {
		r, err := parseReply(x)
		if err != nil {
			t.Fatalf("RL.MTAKE %v: member %d: %v", args[1:], j, err)
		}
		if e := shapeError(r, costs[j]); e != "" {
			t.Logf("mtake %s %v -> member %q %v", p.name, args[1:], ks[j], r)
			t.Fatalf("reply shape (mtake member): %s", e)
		}
		if all == 1 && r.Allowed != 1 {
			t.Logf("mtake %s %v -> admitted, member %q %v", p.name, args[1:], ks[j], r)
			t.Fatalf("reply shape (mtake): admitted with a member refused")
		}
		it.record("mtake", ks[j], p.name, costs[j], sent, recv, r, all == 1)
		out = append(out, r.String())
	}
	w.count("mtake")
	it.logf(t, "%5d mtake %s %q %v -> %d %s", it.ms(recv), p.name, ks, costs, all, strings.Join(out, " "))
}

func (it *iteration) grpc(t *rapid.T, ctx context.Context) {
	w := it.w
	_, p := w.pick(t)
	req := &rlsv3.RateLimitRequest{Domain: "gw"}
	var ks []string
	var costs []int64
	for j := range rapid.IntRange(1, 2).Draw(t, "grpc.n") {
		entry := []string{"user", "acct"}[(j+rapid.IntRange(0, 1).Draw(t, fmt.Sprintf("g%d.entry", j)))%2]
		id := rapid.SampledFrom([]string{"a", "b"}).Draw(t, fmt.Sprintf("g%d.id", j))
		c := drawCost(t, fmt.Sprintf("g%d.cost", j))
		key := fmt.Sprintf("gw:%s=i%d%s", entry, it.n, id)
		if len(ks) > 0 && ks[0] == key {
			break
		}
		ks, costs = append(ks, key), append(costs, c)
		req.Descriptors = append(req.Descriptors, &ratelimitv3.RateLimitDescriptor{
			Entries:    []*ratelimitv3.RateLimitDescriptor_Entry{{Key: entry, Value: fmt.Sprintf("i%d%s", it.n, id)}},
			HitsAddend: nil,
		})
	}
	if len(ks) == 1 {
		req.HitsAddend = uint32(costs[0])
	} else {
		for j := range ks { // one cost per descriptor needs a per-descriptor hits_addend
			costs[j] = 1
		}
	}
	sent := time.Now()
	resp, err := p.gc.ShouldRateLimit(ctx, req)
	recv := time.Now()
	if err != nil {
		it.opError(t, p, sent, recv, err, "ShouldRateLimit %v", ks)
		return
	}
	if len(resp.Statuses) != len(ks) {
		t.Fatalf("ShouldRateLimit %v: %d statuses", ks, len(resp.Statuses))
	}
	ok := resp.OverallCode == rlsv3.RateLimitResponse_OK
	var codes []string
	for j, s := range resp.Statuses {
		codes = append(codes, fmt.Sprintf("%s/%d", s.Code, s.LimitRemaining))
		if ok && s.Code == rlsv3.RateLimitResponse_OK {
			it.mu.Lock()
			k := it.log(ks[j], false)
			k.Adm = append(k.Adm, Admission{Sent: sent, Recv: recv, Cost: costs[j], By: "grpc", Door: "grpc", Proc: p.name})
			it.mu.Unlock()
		}
	}
	w.count("grpc")
	it.logf(t, "%5d grpc %s %q %v -> %s %s", it.ms(recv), p.name, ks, costs, resp.OverallCode, strings.Join(codes, " "))
}

// burst takes one key many times at once from every process, so that the
// hot-key paths engage.
func (it *iteration) burst(t *rapid.T, ctx context.Context) {
	w := it.w
	var key string
	switch rapid.IntRange(0, 5).Draw(t, "burst.hot") {
	case 1, 2, 3:
		fam := rapid.SampledFrom([]string{"hl", "hs"}).Draw(t, "burst.family")
		key = it.base(fam, rapid.SampledFrom([]string{"a", "b"}).Draw(t, "burst.id"))
	case 4, 5: // a failure policy's key (local, open): many decisions of it meet a fault
		fam := rapid.SampledFrom([]string{"lo", "lg", "op", "og", "du"}).Draw(t, "burst.failfamily")
		key = it.base(fam, rapid.SampledFrom([]string{"a", "b"}).Draw(t, "burst.id"))
	default:
		key = it.drawKey(t, "burst.key")
	}
	n := rapid.IntRange(20, 80).Draw(t, "burst.n")
	const workers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	by := map[string]int{}
	admitted := 0
	var firstErr error
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := w.procs[g%len(w.procs)]
			for j := g; j < n; j += workers {
				sent := time.Now()
				r, err := p.take(ctx, "RL.TAKE", key, 1)
				recv := time.Now()
				mu.Lock()
				if err != nil && w.unknownOutcome(p, sent, recv, err) {
					err = nil // its process was being killed: booked nowhere
					mu.Unlock()
					continue
				}
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					if e := shapeError(r, 1); e != "" && firstErr == nil {
						firstErr = fmt.Errorf("reply shape (burst): %s", e)
					}
					by[r.DecidedBy]++
					if r.Allowed == 1 {
						admitted++
					}
				}
				mu.Unlock()
				if err == nil {
					it.record("resp", key, p.name, 1, sent, recv, r, true)
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		t.Logf("burst %q: %v", key, firstErr)
		if w.nem != nil && w.keepGoing {
			it.errorFinding(t, "error reply to RL.TAKE (burst)", fmt.Sprintf("burst %q: %v", key, firstErr))
		} else {
			t.Fatal(firstErr)
		}
	}
	w.mu.Lock()
	w.stats.ops["burst"]++
	w.stats.ops["burst-take"] += n
	w.mu.Unlock()
	it.logf(t, "%5d burst %q x%d -> admitted %d, decided_by %v", it.ms(time.Now()), key, n, admitted, by)
}
