package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// infoInt is field of `INFO sluice`.
func infoInt(ctx context.Context, t *testing.T, c *redis.Client, field string) int64 {
	t.Helper()
	text, err := c.Do(ctx, "INFO", "sluice").Text()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(text, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO %s: %q", field, v)
			}
			return n
		}
	}
	t.Fatalf("INFO sluice has no %s:\n%s", field, text)
	return 0
}

// TestLeaseDroppedOnPolicyChange: a key leased hot under limit 1000 holds
// up to 62 tokens (limit/16) on the instance; its policy changes to limit
// 10, as users change one (RL.POLICY SET, or an edited file and a reload).
// Once the change is in force here, the key admits at most the new
// policy's 10 + rate × T (DESIGN: an interval that starts once a change is
// in force is bounded by the new policy alone): no token leased under the
// old one admits.
func TestLeaseDroppedOnPolicyChange(t *testing.T) {
	t.Parallel()
	rc := redistest.NewCluster(t, localredis.Config{})
	const smaller = `{"match": "*", "limit": 10, "rate": 1, "period": "1h", "on_store_error": "closed", "hot": {"mode": "lease", "threshold": 50}}`
	// One after the other: a runtime policy set through one instance is
	// in force on every instance of the cluster.
	for _, how := range []string{"reload", "RL.POLICY SET", "RL.POLICY SET and DEL"} {
		t.Run(how, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "sluice.yaml")
			write := func(policyLimit int) {
				t.Helper()
				yaml := fmt.Sprintf("policies:\n  - name: api\n    match: \"*\"\n    limit: %d\n    rate: 1\n    period: 1h\n    on_store_error: closed\n    hot: {mode: lease, threshold: 50}\n", policyLimit)
				if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			write(1000)
			cfg := Defaults()
			cfg.Listen, cfg.Admin, cfg.PolicyFile, cfg.Cluster = "127.0.0.1:0", "", file, strings.Join(rc.Addrs(), ",")
			cfg.Timeout = 5 * time.Second
			cfg.LeaseTTL = time.Hour // the leased tokens stay on the instance for the whole test
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			a, ctx, c := startApp(t, cfg)
			key := "viral:" + strings.ReplaceAll(how, " ", "-")
			takeOne := func() (allowed bool, policyLimit int64, by string) {
				t.Helper()
				v, err := c.Do(ctx, "RL.TAKE", key).Slice()
				if err != nil || len(v) != 6 {
					t.Fatalf("RL.TAKE %s: %v, %v", key, v, err)
				}
				return v[0] == int64(1), v[1].(int64), fmt.Sprint(v[5])
			}

			// Hot and leased under limit 1000, with most of a block held:
			// a claim has just been made.
			held := int64(0)
			for i := 0; held < 40; i++ {
				if i == 2000 {
					t.Fatalf("2000 takes and %d tokens held by the lease", held)
				}
				if ok, _, by := takeOne(); !ok {
					t.Fatalf("take %d refused under limit 1000 (%s)", i, by)
				} else if by == limit.ByLease {
					held = infoInt(ctx, t, c, "lease_tokens_claimed") - infoInt(ctx, t, c, "lease_hits") - infoInt(ctx, t, c, "lease_tokens_returned")
				}
			}

			switch how {
			case "reload":
				write(10)
				if err := a.Reload(); err != nil {
					t.Fatal(err)
				}
			case "RL.POLICY SET":
				if err := c.Do(ctx, "RL.POLICY", "SET", "api", smaller).Err(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Do(context.Background(), "RL.POLICY", "DEL", "api") })
			case "RL.POLICY SET and DEL":
				// Another policy in force for a while, which the lease
				// never sees (hot off), then the file's back.
				if err := c.Do(ctx, "RL.POLICY", "SET", "api", strings.Replace(smaller, `"lease"`, `"off"`, 1)).Err(); err != nil {
					t.Fatal(err)
				}
				if _, policyLimit, by := takeOne(); policyLimit != 10 || by != limit.ByStore {
					t.Fatalf("take under the runtime policy: limit %d by %s, want 10 by the store", policyLimit, by)
				}
				if err := c.Do(ctx, "RL.POLICY", "DEL", "api").Err(); err != nil {
					t.Fatal(err)
				}
				claims := infoInt(ctx, t, c, "lease_claims")
				ok, policyLimit, by := takeOne()
				got := infoInt(ctx, t, c, "lease_claims") - claims
				t.Logf("%s: %d tokens leased under limit 1000 before; the first take after the file's policy came back: allowed %v, limit %d, by %s, after %d claims", how, held, ok, policyLimit, by, got)
				if policyLimit != 1000 || by != limit.ByLease || got != 1 {
					t.Fatalf("the first take after the file's policy came back: limit %d by %s after %d claims; want limit 1000, by a lease claimed anew (the %d tokens held from before dropped)", policyLimit, by, got, held)
				}
				return
			}
			start := time.Now()
			admitted, byPath := 0, map[string]int{}
			for i := range 200 {
				ok, policyLimit, by := takeOne()
				if policyLimit != 10 {
					t.Fatalf("take %d after the change: limit %d, want the new policy's 10 in force", i, policyLimit)
				}
				byPath[by]++
				if ok {
					admitted++
				}
			}
			bound := 10 + time.Since(start).Hours() // rate 1 per hour
			t.Logf("%s: %d tokens leased under limit 1000 at the change; after it, %d of 200 takes admitted (bound 10 + rate·T = %.4f), decided_by %v",
				how, held, admitted, bound, byPath)
			if float64(admitted) > bound {
				t.Fatalf("%d admitted after the change to limit 10, bound %.4f: tokens leased under the old policy admitted", admitted, bound)
			}
		})
	}
}
