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

// LatencyLabConfig says what `sluice lab latency` measures. The zero value: 20,000
// sequential decisions from one client on each path, against a new local
// cluster.
type LatencyLabConfig struct {
	// Cluster are seed nodes (host:port) of a running Redis Cluster; nil
	// starts a 3+3 cluster and stops it at the end.
	Cluster []string
	// Binary is the sluice binary; "" means this executable.
	Binary string
	// Limit and Rate (per second) are the bucket; 0 means 100 and 50.
	Limit, Rate int64
	// Samples is the decisions timed on each path, after a warm-up of
	// 500; 0 means 20,000, at most 1,000,000.
	Samples int
	// Now is the clock of the report's date; nil means time.Now.
	Now func() time.Time
}

func (c *LatencyLabConfig) resolve() error {
	c.Samples = cmp.Or(c.Samples, DefaultLatencyLabSamples)
	c.Limit, c.Rate = cmp.Or(c.Limit, DefaultLabLimit), cmp.Or(c.Rate, DefaultLabRate)
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
}

// LatencyLabReport is `sluice lab latency`: the experiment (run) and what it measured.
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
	key := fmt.Sprintf("acme:latency:%d", c.Now().UnixNano())
	if rep.Owner, err = st.owner(ctx, redisKey(key)); err != nil {
		return err
	}

	// (a) the decision itself, in this process.
	s := local.New(local.Config{})
	reqs := []limit.Request{{Key: key, Cost: 1, Op: limit.OpTake, Policy: pol}}
	out := make([]limit.Result, 1)
	lat, allowed, err := timeCalls(ctx, c.Samples, func() (bool, error) {
		s.Do(ctx, reqs, out)
		return out[0].Allowed, out[0].Err
	})
	if err := rep.add(rig, LatencyLabRow{Path: "in-process Go decision (local.Store.Do)", Note: "no I/O; but per process: wrong at 2+ processes"}, lat, allowed, err); err != nil {
		return err
	}

	// (b) and (c): RL.TAKE through one sluice process, embedded, then in
	// front of the cluster.
	for _, arm := range []struct {
		seeds      []string
		path, note string
	}{
		{nil, "RL.TAKE → sluice, embedded (no Redis)", "one loopback RESP round trip + the same Go decision; still per process"},
		{rig.seeds, "RL.TAKE → sluice → Redis Cluster", "two hops: client → sluice → owning primary (EVALSHA in a pipeline); one global bucket"},
	} {
		clients, err := rig.startSluice(ctx, 1, arm.seeds, rig.policy, 1)
		if err != nil {
			return err
		}
		lat, allowed, err := rep.takes(ctx, clients[0], key)
		rig.stopSluice()
		if err := rep.add(rig, LatencyLabRow{Path: arm.path, Note: arm.note}, lat, allowed, err); err != nil {
			return err
		}
	}

	// (d) sluice's script straight to the owner, as the seed lab does.
	lat, allowed, err = rep.evalsha(ctx, st, key)
	if err := rep.add(rig, LatencyLabRow{Path: "EVALSHA straight to the owning primary", Note: "one hop + the script, as the seed lab measures; no batching, no failure policy"}, lat, allowed, err); err != nil {
		return err
	}
	return ctx.Err()
}

// add is one path's row, from its timed calls, or the error that ended
// them.
func (rep *LatencyLabReport) add(rig *rig, row LatencyLabRow, lat []time.Duration, allowed int, err error) error {
	if err != nil {
		return rig.errorf("%s: %w", row.Path, err)
	}
	row.Samples, row.Allowed = len(lat), allowed
	row.Max = float64(maxDuration(lat)) / float64(time.Millisecond)
	row.P50, row.P99 = Percentile(lat, 50), Percentile(lat, 99)
	rep.Rows = append(rep.Rows, row)
	rig.logf("%s: p50 %s ms, p99 %s ms, max %s ms over %d samples (%d allowed)", row.Path, ms(row.P50), ms(row.P99), ms(row.Max), row.Samples, row.Allowed)
	return nil
}

// takes times RL.TAKE key through c, a sluice process's client.
func (rep *LatencyLabReport) takes(ctx context.Context, c *redis.Client, key string) ([]time.Duration, int, error) {
	want := rep.Config.Limit
	return timeCalls(ctx, rep.Config.Samples, func() (bool, error) {
		v, err := takeOnce(ctx, c, key)
		if err == nil && v[1] != want {
			err = fmt.Errorf("RL.TAKE %s = %v: limit %v, want %d: sluice does not run the lab's policy", key, v, v[1], want)
		}
		return err == nil && v[0] == int64(1), err
	})
}

// evalsha times sluice's script by EVALSHA straight to key's owner.
func (rep *LatencyLabReport) evalsha(ctx context.Context, st *store, key string) ([]time.Duration, int, error) {
	oc := redis.NewClient(&redis.Options{Addr: rep.Owner, MaxRetries: -1, DisableIdentity: true, Protocol: 2, PoolSize: 1})
	defer oc.Close()
	args := make([]any, 0, 5)
	for _, a := range st.args() {
		args = append(args, a)
	}
	rk := []string{redisKey(key)}
	return timeCalls(ctx, rep.Config.Samples, func() (bool, error) {
		v, err := oc.EvalSha(ctx, st.sha, rk, args...).Slice()
		if err != nil {
			return false, fmt.Errorf("EVALSHA on %s: %w", rep.Owner, err)
		}
		if len(v) != lua.ReplyInts {
			return false, fmt.Errorf("EVALSHA on %s replied %d elements, want %d: %v", rep.Owner, len(v), lua.ReplyInts, v)
		}
		return v[0] == int64(1), nil
	})
}

// timeCalls runs call a warm-up's worth of times, then n times, timing
// each and counting what it reports as allowed.
func timeCalls(ctx context.Context, n int, call func() (bool, error)) ([]time.Duration, int, error) {
	lat := make([]time.Duration, 0, n)
	allowed := 0
	for i := range latencyLabWarmup + n {
		if err := ctx.Err(); err != nil {
			return lat, allowed, err
		}
		t0 := time.Now()
		ok, err := call()
		d := time.Since(t0)
		if err != nil {
			return lat, allowed, err
		}
		if i >= latencyLabWarmup {
			lat = append(lat, d)
			if ok {
				allowed++
			}
		}
	}
	return lat, allowed, nil
}

// Markdown renders the seed lab's latency table with the measured numbers.
func (r *LatencyLabReport) Markdown() string { return render("latency", r) }

// Warmup is the untimed decisions on each path before the samples.
func (r *LatencyLabReport) Warmup() int { return latencyLabWarmup }
