package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
	"github.com/sluice-rl/sluice/lua"
)

// Defaults and bounds of LatencyLabConfig.
const (
	DefaultLatencyLabSamples = 20_000
	MaxLatencyLabSamples     = 1_000_000
	latencyLabWarmup         = 500
)

// LatencyLabConfig says what `sluice-lab latency` measures. The zero value: 20,000
// sequential decisions from one client on each path, against a new local
// cluster, under a bucket the run never exhausts, so that every decision
// is a trip to the path the row names (the store for the cluster rows):
// no refusal for the deny cache to answer, hot-key leases off.
type LatencyLabConfig struct {
	// Cluster are seed nodes (host:port) of a running Redis Cluster; nil
	// starts a 3+3 cluster and stops it at the end.
	Cluster []string
	// Binary is the sluice binary; "" means sluiceBinary's.
	Binary string
	// Limit and Rate (per second) are the bucket; 0 means the warm-up plus
	// Samples (every decision of a row admitted, each row its own key) and
	// 50. A smaller limit refuses most of a row's decisions, which sluice
	// then answers from its deny cache: the cluster row no longer measures
	// the store, and the report marks it.
	Limit, Rate int64
	// Samples is the decisions timed on each path, after a warm-up of
	// 500; 0 means 20,000, at most 1,000,000.
	Samples int
	// Now is the clock of the report's date; nil means time.Now.
	Now func() time.Time
}

func (c *LatencyLabConfig) resolve() error {
	c.Samples = cmp.Or(c.Samples, DefaultLatencyLabSamples)
	c.Limit, c.Rate = cmp.Or(c.Limit, int64(latencyLabWarmup+c.Samples)), cmp.Or(c.Rate, DefaultLabRate)
	orNow(&c.Now)
	if c.Samples < 0 || c.Samples > MaxLatencyLabSamples {
		return fmt.Errorf("lab latency: samples %d: want 1…%d", c.Samples, MaxLatencyLabSamples)
	}
	if c.Limit < 0 || c.Rate < 0 {
		return errors.New("lab latency: limit and rate must not be negative")
	}
	return nil
}

func (c *LatencyLabConfig) rig() rigSpec {
	return rigSpec{name: "lab latency", binary: c.Binary, cluster: c.Cluster, now: c.Now,
		policy: seedPolicy("latency", 0, c.Limit, c.Rate, "closed", 0), tool: "go-redis, one client, sequential requests"}
}

// config is the report's config, for RunLab.
func (rep *LatencyLabReport) config() labConfig { return &rep.Config }

// LatencyLabRow is one path of a decision.
type LatencyLabRow struct {
	Path, Note string
	Samples    int
	P50, P99   float64 // ms
	Max        float64 // ms
	Allowed    int
	// Want is the decided_by the path is meant to measure: embedded for
	// the in-process and embedded rows, store for the cluster and EVALSHA
	// rows. DecidedBy counts the timed replies by their decided_by (the
	// reply's 6th field; the script's replies, which have none, as store).
	Want      string
	DecidedBy map[string]int64
}

// MinWantShare is the least share of a row's timed decisions that its
// own path (LatencyLabRow.Want) must have decided for the row to stand
// for that path.
const MinWantShare = 0.99

// WantShare is the share of the timed decisions decided by Want.
func (r LatencyLabRow) WantShare() float64 {
	return ratio(float64(r.DecidedBy[r.Want]), float64(r.Samples))
}

// Check is "" when at least MinWantShare of the row's decisions were its
// own path's, else what the row measured instead: its percentiles are then
// not that path's.
func (r LatencyLabRow) Check() string {
	if r.Samples > 0 && r.WantShare() >= MinWantShare {
		return ""
	}
	return fmt.Sprintf("NOT the %s path: %s of %s decided_by=%s (%s)", r.Want, thousands(float64(r.DecidedBy[r.Want])), thousands(float64(r.Samples)), r.Want, formatCounts(r.DecidedBy))
}

// Verdict is the row's check as the table shows it.
func (r LatencyLabRow) Verdict() string {
	if c := r.Check(); c != "" {
		return "**" + c + "**"
	}
	return fmt.Sprintf("%s%% %s", fixed(100*r.WantShare(), 1), r.Want)
}

// LatencyLabReport is `sluice-lab latency`: the experiment (run) and what it measured.
type LatencyLabReport struct {
	Config LatencyLabConfig
	Owner  string
	Rows   []LatencyLabRow
	LabRun
}

// run times one decision at a time on four paths: the Go token
// bucket in this process (local.Store.Do), RL.TAKE through sluice in
// embedded mode (a RESP round trip, no Redis), RL.TAKE through sluice in
// front of the cluster, and EVALSHA of sluice's script straight to the
// primary that owns the key. One client, sequential requests: latency,
// not throughput.
func (rep *LatencyLabReport) run(ctx context.Context, rig *rig) error {
	c := rep.Config
	set, err := rig.policySet()
	if err != nil {
		return err
	}
	pol := set.Match("acme")
	st, err := rig.openStore(ctx, pol)
	if err != nil {
		return err
	}
	defer st.close()
	// Every row has a key of its own, all of one hash tag, so that the two
	// store rows reach the same primary and neither spends the other's
	// tokens.
	tag := fmt.Sprintf("{latency-%d}", c.Now().UnixNano())
	rowKey := func(row string) string { return tag + ":" + row }
	if rep.Owner, err = st.owner(ctx, redisKey(rowKey("store"))); err != nil {
		return err
	}

	// (a) the decision itself, in this process.
	s := local.New(local.Config{})
	reqs := []limit.Request{{Key: rowKey("in-process"), Cost: 1, Op: limit.OpTake, Policy: pol}}
	out := make([]limit.Result, 1)
	lat, counts, err := timeCalls(ctx, c.Samples, func() (decision, error) {
		s.Do(ctx, reqs, out)
		return decision{out[0].Allowed, out[0].DecidedBy}, out[0].Err
	})
	if err := rep.add(rig, LatencyLabRow{Path: "in-process Go decision (local.Store.Do)", Note: "no I/O; but per process: wrong at 2+ processes", Want: limit.ByEmbedded}, lat, counts, err); err != nil {
		return err
	}

	// (b) and (c): RL.TAKE through one sluice process, embedded, then in
	// front of the cluster.
	for _, arm := range []struct {
		seeds                 []string
		key, path, note, want string
	}{
		{nil, "embedded", "RL.TAKE → sluice, embedded (no Redis)", "one loopback RESP round trip + the same Go decision; still per process", limit.ByEmbedded},
		{rig.seeds, "sluice", "RL.TAKE → sluice → Redis Cluster", "two hops: client → sluice → owning primary (EVALSHA in a pipeline); one global bucket", limit.ByStore},
	} {
		clients, err := rig.startSluice(ctx, 1, arm.seeds, rig.policy, 1)
		if err != nil {
			return err
		}
		lat, counts, err := rep.takes(ctx, clients[0], rowKey(arm.key))
		rig.stopSluice()
		if err := rep.add(rig, LatencyLabRow{Path: arm.path, Note: arm.note, Want: arm.want}, lat, counts, err); err != nil {
			return err
		}
	}

	// (d) sluice's script straight to the owner, as the seed lab does.
	lat, counts, err = rep.evalsha(ctx, st, rowKey("store"))
	if err := rep.add(rig, LatencyLabRow{Path: "EVALSHA straight to the owning primary", Note: "one hop + the script, as the seed lab measures; no batching, no failure policy", Want: limit.ByStore}, lat, counts, err); err != nil {
		return err
	}
	return ctx.Err()
}

// add is one path's row, from its timed calls, or the error that ended
// them.
func (rep *LatencyLabReport) add(rig *rig, row LatencyLabRow, lat []time.Duration, t tally, err error) error {
	if err != nil {
		return rig.errorf("%s: %w", row.Path, err)
	}
	row.Samples, row.Allowed, row.DecidedBy = len(lat), t.allowed, t.by
	row.Max = float64(maxDuration(lat)) / float64(time.Millisecond)
	row.P50, row.P99 = Percentile(lat, 50), Percentile(lat, 99)
	rep.Rows = append(rep.Rows, row)
	rig.logf("%s: p50 %s ms, p99 %s ms, max %s ms over %d samples (%d allowed; decided_by %s)", row.Path, ms(row.P50), ms(row.P99), ms(row.Max), row.Samples, row.Allowed, formatCounts(row.DecidedBy))
	if c := row.Check(); c != "" {
		rig.logf("%s: %s", row.Path, c)
	}
	return nil
}

// takes times RL.TAKE key through c, a sluice process's client.
func (rep *LatencyLabReport) takes(ctx context.Context, c *redis.Client, key string) ([]time.Duration, tally, error) {
	want := rep.Config.Limit
	return timeCalls(ctx, rep.Config.Samples, func() (decision, error) {
		v, err := takeOnce(ctx, c, key)
		if err != nil {
			return decision{}, err
		}
		if v[1] != want {
			return decision{}, fmt.Errorf("RL.TAKE %s = %v: limit %v, want %d: sluice does not run the lab's policy", key, v, v[1], want)
		}
		return decision{v[0] == int64(1), v[5].(string)}, nil
	})
}

// evalsha times sluice's script by EVALSHA straight to key's owner.
func (rep *LatencyLabReport) evalsha(ctx context.Context, st *store, key string) ([]time.Duration, tally, error) {
	oc := redis.NewClient(&redis.Options{Addr: rep.Owner, MaxRetries: -1, DisableIdentity: true, Protocol: 2, PoolSize: 1})
	defer oc.Close()
	args := make([]any, 0, 5)
	for _, a := range st.args() {
		args = append(args, a)
	}
	rk := []string{redisKey(key)}
	return timeCalls(ctx, rep.Config.Samples, func() (decision, error) {
		v, err := oc.EvalSha(ctx, st.sha, rk, args...).Slice()
		if err != nil {
			return decision{}, fmt.Errorf("EVALSHA on %s: %w", rep.Owner, err)
		}
		if len(v) != lua.ReplyInts {
			return decision{}, fmt.Errorf("EVALSHA on %s replied %d elements, want %d: %v", rep.Owner, len(v), lua.ReplyInts, v)
		}
		return decision{v[0] == int64(1), limit.ByStore}, nil
	})
}

// decision is what one timed call answered: admitted or not, and the
// path that decided.
type decision struct {
	allowed bool
	by      string
}

// tally counts the timed calls' decisions.
type tally struct {
	allowed int
	by      map[string]int64
}

// timeCalls runs call a warm-up's worth of times, then n times, timing
// each and counting what it reports: admitted, and by which path.
func timeCalls(ctx context.Context, n int, call func() (decision, error)) ([]time.Duration, tally, error) {
	lat := make([]time.Duration, 0, n)
	t := tally{by: map[string]int64{}}
	for i := range latencyLabWarmup + n {
		if err := ctx.Err(); err != nil {
			return lat, t, err
		}
		t0 := time.Now()
		d, err := call()
		el := time.Since(t0)
		if err != nil {
			return lat, t, err
		}
		if i >= latencyLabWarmup {
			lat = append(lat, el)
			t.by[d.by]++
			if d.allowed {
				t.allowed++
			}
		}
	}
	return lat, t, nil
}

// Markdown renders the seed lab's latency table with the measured numbers.
func (r *LatencyLabReport) Markdown() string { return render("latency", r) }

// NeverExhausted reports whether the bucket holds every decision of a
// row, warm-up included: then nothing is refused.
func (r *LatencyLabReport) NeverExhausted() bool {
	return r.Config.Limit >= int64(latencyLabWarmup+r.Config.Samples)
}

// Warmup is the untimed decisions on each path before the samples.
func (r *LatencyLabReport) Warmup() int { return latencyLabWarmup }
