package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
	"github.com/sluice-rl/sluice/policy"
)

// Defaults and bounds of LatencyLabConfig.
const (
	DefaultLatencyLabSamples = 20_000
	MaxLatencyLabSamples     = 1_000_000
	latencyLabWarmup         = 500
)

// LatencyLabConfig says what LatencyLab measures. The zero value: 20,000
// sequential decisions from one client on each path, against a new local
// cluster.
type LatencyLabConfig struct {
	// Cluster are seed nodes (host:port) of a running Redis Cluster; nil
	// starts a 3+3 cluster and stops it at the end.
	Cluster []string
	// Binary is the sluice binary; "" means this executable.
	Binary string
	// Samples is the decisions timed on each path, after a warm-up of
	// 500; 0 means 20,000, at most 1,000,000.
	Samples int
	// Limit and Rate (per second) are the bucket; 0 means 100 and 50.
	Limit, Rate int64
	// Now is the clock of the report's date; nil means time.Now.
	Now func() time.Time
}

func (cfg LatencyLabConfig) resolve() (LatencyLabConfig, error) {
	c := cfg
	if c.Samples == 0 {
		c.Samples = DefaultLatencyLabSamples
	}
	if c.Limit == 0 {
		c.Limit = DefaultLabLimit
	}
	if c.Rate == 0 {
		c.Rate = DefaultLabRate
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Samples < 0 || c.Samples > MaxLatencyLabSamples {
		return c, fmt.Errorf("lab latency: samples %d: want 1…%d", c.Samples, MaxLatencyLabSamples)
	}
	if c.Limit < 0 || c.Rate < 0 {
		return c, errors.New("lab latency: limit and rate must not be negative")
	}
	return c, nil
}

func (cfg LatencyLabConfig) policyYAML() string {
	return fmt.Sprintf(`# written by sluice lab latency
policies:
  - name: acme
    match: "*"
    limit: %d
    rate: %d
    period: 1s
    on_store_error: closed
`, cfg.Limit, cfg.Rate)
}

// LatencyLabRow is one path of a decision.
type LatencyLabRow struct {
	Path, Note string
	Samples    int
	P50, P99   float64 // ms
	Max        float64 // ms
	Allowed    int
}

// LatencyLabReport is what LatencyLab measured.
type LatencyLabReport struct {
	Config  LatencyLabConfig
	Machine Machine
	Owner   string
	Rows    []LatencyLabRow
	Elapsed time.Duration
}

// LatencyLab times one decision at a time on four paths: the Go token
// bucket in this process (local.Store.Do), RL.TAKE through sluice in
// embedded mode (a RESP round trip, no Redis), RL.TAKE through sluice in
// front of the cluster, and EVALSHA of sluice's script straight to the
// primary that owns the key. One client, sequential requests: latency,
// not throughput.
func LatencyLab(ctx context.Context, cfg LatencyLabConfig, progress io.Writer) (*LatencyLabReport, error) {
	began := time.Now()
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	set, err := policy.Parse([]byte(c.policyYAML()), "latency.yaml")
	if err != nil {
		return nil, fmt.Errorf("lab latency: the policy: %w", err)
	}
	pol := set.Match("acme")
	bucket, err := pol.Bucket()
	if err != nil {
		return nil, fmt.Errorf("lab latency: the policy: %w", err)
	}
	rig, err := newLabRig(ctx, "latency", c.Binary, c.Cluster, 0, progress)
	if err != nil {
		return nil, err
	}
	defer rig.close()
	path, err := rig.writePolicy("latency.yaml", c.policyYAML())
	if err != nil {
		return nil, err
	}
	st, err := openStore(ctx, rig.seeds, bucket)
	if err != nil {
		return nil, err
	}
	defer st.close()
	key := fmt.Sprintf("acme:latency:%d", c.Now().UnixNano())
	rep := &LatencyLabReport{Config: c, Machine: machine(c.Now(), "unknown", st.version, "go-redis, one client, sequential requests")}
	if rep.Owner, err = st.owner(ctx, redisKey(key)); err != nil {
		return nil, err
	}
	add := func(row LatencyLabRow, lat []time.Duration) {
		row.Samples = len(lat)
		row.Max = float64(maxDuration(lat)) / float64(time.Millisecond)
		row.P50, row.P99 = Percentile(lat, 50), Percentile(lat, 99)
		rep.Rows = append(rep.Rows, row)
		rig.logf("%s: p50 %s ms, p99 %s ms, max %s ms over %d samples (%d allowed)", row.Path, ms(row.P50), ms(row.P99), ms(row.Max), row.Samples, row.Allowed)
	}

	// (a) the decision itself, in this process.
	{
		s := local.New(local.Config{})
		reqs := []limit.Request{{Key: key, Cost: 1, Op: limit.OpTake, Policy: pol}}
		out := make([]limit.Result, 1)
		lat := make([]time.Duration, c.Samples)
		allowed := 0
		for i := range latencyLabWarmup + c.Samples {
			t0 := time.Now()
			s.Do(ctx, reqs, out)
			d := time.Since(t0)
			if out[0].Err != nil {
				return rep, fmt.Errorf("lab latency: local store: %w", out[0].Err)
			}
			if i >= latencyLabWarmup {
				lat[i-latencyLabWarmup] = d
				if out[0].Allowed {
					allowed++
				}
			}
		}
		add(LatencyLabRow{Path: "in-process Go decision (local.Store.Do)", Note: "no I/O; but per process: wrong at 2+ processes", Allowed: allowed}, lat)
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
		clients, err := rig.startSluice(ctx, 1, arm.seeds, path, 1)
		if err != nil {
			return rep, err
		}
		if rep.Machine.Sluice == "unknown" {
			rep.Machine.Sluice = sluiceVersion(ctx, clients[0])
		}
		lat, allowed, err := timeCalls(ctx, c.Samples, func() (bool, error) {
			v, err := takeOnce(ctx, clients[0], key)
			if err != nil {
				return false, err
			}
			if v[1] != c.Limit {
				return false, fmt.Errorf("RL.TAKE %s = %v: limit %v, want %d: sluice does not run the lab's policy", key, v, v[1], c.Limit)
			}
			return v[0] == int64(1), nil
		})
		rig.stopSluice()
		if err != nil {
			return rep, fmt.Errorf("lab latency: %s: %w", arm.path, err)
		}
		add(LatencyLabRow{Path: arm.path, Note: arm.note, Allowed: allowed}, lat)
	}

	// (d) sluice's script straight to the owner, as the seed lab does.
	{
		oc := redis.NewClient(&redis.Options{Addr: rep.Owner, MaxRetries: -1, DisableIdentity: true, Protocol: 2, PoolSize: 1})
		defer oc.Close()
		args := make([]any, 0, 5)
		for _, a := range st.args() {
			args = append(args, a)
		}
		rk := []string{redisKey(key)}
		lat, allowed, err := timeCalls(ctx, c.Samples, func() (bool, error) {
			v, err := oc.EvalSha(ctx, st.sha, rk, args...).Slice()
			if err != nil {
				return false, fmt.Errorf("EVALSHA on %s: %w", rep.Owner, err)
			}
			if len(v) != 6 {
				return false, fmt.Errorf("EVALSHA on %s replied %d elements, want 6: %v", rep.Owner, len(v), v)
			}
			return v[0] == int64(1), nil
		})
		if err != nil {
			return rep, fmt.Errorf("lab latency: %w", err)
		}
		add(LatencyLabRow{Path: "EVALSHA straight to the owning primary", Note: "one hop + the script, as the seed lab measures; no batching, no failure policy", Allowed: allowed}, lat)
	}
	rep.Elapsed = time.Since(began)
	return rep, ctx.Err()
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
func (r *LatencyLabReport) Markdown() string {
	c := r.Config
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# sluice lab latency: what a global decision costs\n\n")
	w("Machine: %s.\n\n", r.Machine)
	w("One client, one decision at a time, %s timed decisions per path after a warm-up of %d; the bucket: capacity %d, refill %d/s "+
		"(most decisions are rejections, which cost the same as admissions). Loopback only: the cluster's primaries are local processes "+
		"(the key's owner: %s). The whole run took %s.\n\n",
		thousands(float64(c.Samples)), latencyLabWarmup, c.Limit, c.Rate, r.Owner, r.Elapsed.Round(time.Second))
	w("| Path | p50 | p99 | note |\n|---|--:|--:|---|\n")
	for _, row := range r.Rows {
		w("| %s | %s ms | %s ms | %s |\n", row.Path, ms(row.P50), ms(row.P99), row.Note)
	}
	w("\n| Path | samples | max | allowed |\n|---|--:|--:|--:|\n")
	for _, row := range r.Rows {
		w("| %s | %s | %s ms | %s |\n", row.Path, thousands(float64(row.Samples)), ms(row.Max), thousands(float64(row.Allowed)))
	}
	w("\nThe in-process figure includes two reads of the clock around each call. A cross-AZ hop adds its round trip to the last two rows; " +
		"a hot key's lease (`hot: {mode: lease}`) buys the round trip back by spending claimed tokens in process.\n")
	return b.String()
}
