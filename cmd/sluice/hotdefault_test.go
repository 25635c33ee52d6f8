package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// hotDefaultConfig says nothing about hot keys for "api"; "off" opts out.
const hotDefaultConfig = `defaults:
  on_store_error: closed
  limit: 200
  rate: 100
  period: 1s
policies:
  - {name: off, match: "off:*", hot: {mode: off}}
  - {name: api, match: "*"}
`

// hotLoad counts the replies of runHammer, which sends RL.TAKE key in pipelines of 16 from 8 callers on each
// client until done says so after a batch (or maxBatches per caller, a
// failure), and counts the replies by decided_by and client, and the
// admitted ones.
type hotLoad struct {
	mu       sync.Mutex
	by       []map[string]int64 // per client
	admitted atomic.Int64
	sent     atomic.Int64
}

func runHammer(t *testing.T, clients []*redis.Client, key string, done func(h *hotLoad) bool) *hotLoad {
	t.Helper()
	const maxBatches = 4000
	h := &hotLoad{by: make([]map[string]int64, len(clients))}
	for i := range h.by {
		h.by[i] = map[string]int64{}
	}
	ctx := t.Context()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for ci, c := range clients {
		for range 8 {
			wg.Go(func() {
				for n := 0; n < maxBatches && !stop.Load(); n++ {
					pipe := c.Pipeline()
					cmds := make([]*redis.Cmd, 16)
					for i := range cmds {
						cmds[i] = pipe.Do(ctx, "RL.TAKE", key, 1)
					}
					if _, err := pipe.Exec(ctx); err != nil {
						t.Error(err)
						stop.Store(true)
						return
					}
					here := map[string]int64{}
					for _, cmd := range cmds {
						v, err := cmd.Slice()
						if err != nil || len(v) != 6 {
							t.Errorf("RL.TAKE %s = %v, %v", key, v, err)
							stop.Store(true)
							return
						}
						if v[0] == int64(1) {
							h.admitted.Add(1)
						}
						by, _ := v[5].(string)
						here[by]++
					}
					h.sent.Add(int64(len(cmds)))
					h.mu.Lock()
					for by, k := range here {
						h.by[ci][by] += k
					}
					finished := done(h)
					h.mu.Unlock()
					if finished {
						stop.Store(true)
					}
				}
			})
		}
	}
	wg.Wait()
	return h
}

// TestHotDefaultOnCluster runs two sluice processes on one real Redis
// Cluster with a policy that has no hot block: a key driven hot on both is
// served by lease on both (decided_by lease), and what they admit together
// stays within the bound of docs/architecture.md (a leased token was taken
// from the one bucket: limit + rate × elapsed); the policy with
// `hot: {mode: off}` stays on the store under the same load. The start-up
// lines show the hot block in force, the built-in policy's too.
func TestHotDefaultOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	seeds := strings.Join(c.Addrs(), ",")
	cfg := writeConfig(t, hotDefaultConfig)
	args := []string{"--config", cfg, "--cluster", seeds}
	pa, pb := startSluice(t, args...), startSluice(t, args...)
	a, b := pa.client(t), pb.client(t)
	clients := []*redis.Client{a, b}
	// The log quotes each rule: its quotes come escaped.
	lease := fmt.Sprintf("hot=lease(threshold=%d/s) (default)", limit.DefaultHotThreshold)
	for _, p := range []*proc{pa, pb} {
		if !p.waitLog(`api match=\"*\" token_bucket limit=200 rate=100/1s on_store_error=closed local_share=1 `+lease, 10*time.Second) ||
			!p.waitLog(`off match=\"off:*\" token_bucket limit=200 rate=100/1s on_store_error=closed local_share=1 hot=off`, time.Second) {
			t.Fatalf("the start-up lines do not show the hot blocks in force:\n%s", p.Logs())
		}
	}
	if p := startSluice(t, "--cluster", seeds); !p.waitLog(`default match=\"*\" token_bucket limit=100 rate=50/1s on_store_error=local local_share=1 `+lease, 10*time.Second) {
		t.Errorf("the built-in policy's line does not show the default lease:\n%s", p.Logs())
	}

	rows, err := a.Do(t.Context(), "RL.POLICY", "LIST").Slice()
	if err != nil || len(rows) != 2 || fmt.Sprint(rows[0]) != "[name off source "+cfg+" hot off]" ||
		fmt.Sprint(rows[1]) != "[name api source "+cfg+" hot "+strings.TrimPrefix(lease, "hot=")+"]" {
		t.Errorf("RL.POLICY LIST = %v, %v; want each policy's hot block in force", rows, err)
	}
	if js, err := a.Do(t.Context(), "RL.POLICY", "GET", "api").Text(); err != nil ||
		!strings.Contains(js, fmt.Sprintf(`"hot":{"mode":"lease","threshold":%d}`, limit.DefaultHotThreshold)) {
		t.Errorf("RL.POLICY GET api = %s, %v; want the default lease", js, err)
	}

	t.Run("no hot block: lease on both instances, within the bound", func(t *testing.T) {
		// Until both instances have served 2,000 takes by lease: each has
		// then seen the key at more than the threshold.
		start := time.Now()
		h := runHammer(t, clients, "viral", func(h *hotLoad) bool { return h.by[0]["lease"] >= 2000 && h.by[1]["lease"] >= 2000 })
		elapsed := time.Since(start)
		for i, by := range h.by {
			if by["lease"] < 2000 || by["split"] != 0 {
				t.Errorf("instance %d decided %v of the hot key's takes, want 2,000 or more by lease", i, by)
			}
			if got := infoOf(t, clients[i], "lease_claims"); got == 0 {
				t.Errorf("instance %d: INFO lease_claims 0", i)
			}
		}
		// Every admitted take spent a token taken from the one bucket
		// between start and now: limit + rate × elapsed at most. Leases
		// under-admit by what the other instance holds, a block of at most
		// limit/16 each.
		budget := 200 + 100*elapsed.Seconds()
		admitted := h.admitted.Load()
		if float64(admitted) > budget || admitted < 200-2*200/16 {
			t.Fatalf("admitted %d of %d in %s, budget %.1f (and at least %d)", admitted, h.sent.Load(), elapsed, budget, 200-2*200/16)
		}
		t.Logf("admitted %d of %d in %s (budget %.1f); decided_by %v", admitted, h.sent.Load(), elapsed, budget, h.by)
		for i, cl := range clients {
			if rows := hotKeyNames(t, cl); !rows["viral"] {
				t.Errorf("instance %d: RL.HOTKEYS %v lacks the key", i, rows)
			}
		}
	})

	t.Run("hot mode off: the store decides", func(t *testing.T) {
		// As many takes as it took the other key to be leased twice over:
		// well above the threshold on each instance.
		sent := int64(0)
		h := runHammer(t, clients, "off:viral", func(h *hotLoad) bool { sent = h.sent.Load(); return sent >= 8000 })
		for i, by := range h.by {
			// overload-closed is the store answering later than the
			// timeout on a loaded machine (CI under -race: 16 of 4,096):
			// not the hot-key path, so it is allowed; lease and split not.
			overload := by["overload-closed"] + by["overload-open"] + by["overload-local"]
			if by["lease"] != 0 || by["split"] != 0 || by["store"] == 0 || by["store"]+by["deny-cache"]+overload != sumOf(by) {
				t.Errorf("instance %d decided %v, want store and deny-cache only (and overload answers of a slow store)", i, by)
			}
			if rows := hotKeyNames(t, clients[i]); rows["off:viral"] {
				t.Errorf("instance %d: RL.HOTKEYS lists off:viral: %v", i, rows)
			}
		}
		if h.sent.Load() < 8000 {
			t.Fatalf("sent %d takes, want 8,000", h.sent.Load())
		}
	})
}

func sumOf(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// hotKeyNames returns the keys RL.HOTKEYS lists.
func hotKeyNames(t *testing.T, c *redis.Client) map[string]bool {
	t.Helper()
	rows, err := c.Do(context.Background(), "RL.HOTKEYS").Slice()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, r := range rows {
		if row, ok := r.([]any); ok && len(row) > 1 {
			if k, ok := row[1].(string); ok {
				out[k] = true
			}
		}
	}
	return out
}
