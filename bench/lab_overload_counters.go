package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// overloadDriver runs the overload lab's redis-benchmark steps and reads
// the counters around each: sluice's INFO for its side, the primaries'
// INFO for the direct side. Not safe for concurrent use.
type overloadDriver struct {
	bin    string // redis-benchmark
	sluice *redis.Client
	store  *store
}

// overloadPollEvery is how often a step reads the connected clients while
// redis-benchmark runs; redis-benchmark 7 connects 64 clients each 50 ms,
// so 5,000 clients stay connected for seconds.
const overloadPollEvery = 100 * time.Millisecond

// uniform runs one uniform step of side and fills its row. It fails when
// fewer connections reached the server than in.Clients: a step at 5,000
// clients must be one.
func (d overloadDriver) uniform(ctx context.Context, in invocation, side string) (OverloadLabRow, error) {
	row := OverloadLabRow{Clients: in.Clients, Side: side, Requests: in.Requests}
	var err error
	if side == OverloadDirect {
		err = d.direct(ctx, in, &row)
	} else {
		var delta sluiceCounters
		delta, row.Peak, row.Result, row.Elapsed, err = d.throughSluice(ctx, in)
		row.Connections = delta.connections
		row.Decisions, row.DecidedBy = delta.decisions, delta.by
		row.BreakerOpens, row.Overload = delta.node["breaker_opens"], delta.node["overload"]
		row.OwnP99 = ownQuantile(delta.durations, 0.99)
	}
	if err != nil {
		return row, err
	}
	return row, connected(row.Connections, in.Clients)
}

// tenant runs one step on the tenant key and fills its row: what was
// admitted against the budget of the step's timed window.
func (d overloadDriver) tenant(ctx context.Context, in invocation, key string, limit, rate int64, share float64) (OverloadTenantRow, error) {
	row := OverloadTenantRow{Clients: in.Clients, Key: key, Requests: in.Requests}
	delta, _, res, took, err := d.throughSluice(ctx, in)
	if err != nil {
		return row, err
	}
	row.Result, row.Elapsed, row.Connections = res, took, delta.connections
	row.Admitted, row.Rejected, row.DecidedBy = delta.allowed, delta.rejected, delta.by
	row.BreakerOpens = delta.node["breaker_opens"]
	row.Window = time.Duration(float64(in.Requests) / res.RPS * float64(time.Second))
	row.Budget = labBudget(limit, rate, row.Window)
	row.LocalShare = row.Budget * share
	return row, connected(row.Connections, in.Clients)
}

// connected fails when fewer than clients connections were accepted.
func connected(accepted int64, clients int) error {
	if accepted < int64(clients) {
		return fmt.Errorf("only %d of %d clients connected", accepted, clients)
	}
	return nil
}

// throughSluice runs in against sluice and returns the deltas of its INFO
// counters, the most connections above the lab's own seen meanwhile, and
// redis-benchmark's summary and run time.
func (d overloadDriver) throughSluice(ctx context.Context, in invocation) (sluiceCounters, int64, Result, time.Duration, error) {
	before, err := d.sluiceInfo(ctx)
	if err != nil {
		return sluiceCounters{}, 0, Result{}, 0, err
	}
	stop := watchPeak(ctx, func(ctx context.Context) (int64, error) {
		text, err := d.sluice.Do(ctx, "INFO", "clients").Text()
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(infoFields(text)["connected_clients"], 10, 64)
	})
	res, took, err := runBenchmark(ctx, d.bin, in, overloadLabRunTimeout)
	peak := stop()
	if err != nil {
		return sluiceCounters{}, 0, res, took, err
	}
	after, err := d.sluiceInfo(ctx)
	if err != nil {
		return sluiceCounters{}, 0, res, took, err
	}
	return after.minus(before), max(0, peak-before.connected), res, took, nil
}

// direct runs in straight at the shards and fills row from the
// primaries' counters.
func (d overloadDriver) direct(ctx context.Context, in invocation, row *OverloadLabRow) error {
	before, err := d.primaries(ctx)
	if err != nil {
		return err
	}
	stop := watchPeak(ctx, func(ctx context.Context) (int64, error) {
		c, err := d.primaries(ctx)
		return c.connected, err
	})
	res, took, err := runBenchmark(ctx, d.bin, in, overloadLabRunTimeout)
	peak := stop()
	row.Result, row.Elapsed = res, took
	if err != nil {
		return err
	}
	after, err := d.primaries(ctx)
	if err != nil {
		return err
	}
	row.Connections = after.connections - before.connections
	row.Peak = max(0, peak-before.connected)
	row.ScriptCalls = after.calls - before.calls
	if row.ScriptCalls < int64(in.Requests) {
		return fmt.Errorf("the primaries ran the script %d times for %d requests", row.ScriptCalls, in.Requests)
	}
	return nil
}

// primaryCounters are the primaries' counters a direct step reads, summed.
type primaryCounters struct{ calls, connections, connected int64 }

func (d overloadDriver) primaries(ctx context.Context) (primaryCounters, error) {
	var out primaryCounters
	stats, err := d.store.stats(ctx)
	if err != nil {
		return out, err
	}
	for _, s := range stats {
		out.calls += s.scriptCalls
	}
	var mu sync.Mutex
	err = d.store.cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		text, err := c.Info(ctx, "clients", "stats").Result()
		if err != nil {
			return fmt.Errorf("INFO on %s: %w", c.Options().Addr, err)
		}
		f := infoFields(text)
		total, err1 := strconv.ParseInt(f["total_connections_received"], 10, 64)
		now, err2 := strconv.ParseInt(f["connected_clients"], 10, 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("INFO on %s lacks total_connections_received or connected_clients", c.Options().Addr)
		}
		mu.Lock()
		out.connections += total
		out.connected += now
		mu.Unlock()
		return nil
	})
	return out, err
}

// watchPeak calls read every overloadPollEvery until stop is called, and
// stop returns the largest value read (0 when none). A failed read is
// skipped: the peak is evidence, the accepted connections the check.
func watchPeak(ctx context.Context, read func(context.Context) (int64, error)) (stop func() int64) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan int64, 1)
	go func() {
		var peak int64
		t := time.NewTicker(overloadPollEvery)
		defer t.Stop()
		for {
			if n, err := read(ctx); err == nil {
				peak = max(peak, n)
			}
			select {
			case <-ctx.Done():
				done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		cancel()
		return <-done
	}
}

// sluiceCounters are the counters of sluice's INFO that a step reads.
type sluiceCounters struct {
	decisions, allowed, rejected int64
	// connections is total_connections_received, connected
	// connected_clients.
	connections, connected int64
	// by counts decisions by decided_by path ("fallback-open"), from the
	// decided_by_* lines; node sums each integer field of the node_ lines
	// ("breaker_opens", "overload") over the nodes.
	by, node map[string]int64
	// durations is the INFO line request_duration_us: sluice's own time
	// per request, cumulative counts by upper bound in µs (le_inf last,
	// as -1).
	durations map[int64]int64
}

func (d overloadDriver) sluiceInfo(ctx context.Context) (sluiceCounters, error) {
	text, err := d.sluice.Do(ctx, "INFO").Text()
	if err != nil {
		return sluiceCounters{}, fmt.Errorf("INFO on sluice: %w", err)
	}
	return parseSluiceInfo(text)
}

// parseSluiceInfo reads sluiceCounters from the text of sluice's INFO.
// decided_by_fallback_open counts the path fallback-open (INFO names
// cannot hold '-'); a node line reads
// node_<host:port>:breaker=closed,…,overload=N,breaker_opens=N,…, so it
// is split at ',' and '=', not by infoFields, which would key every node
// by its host. Fields that are not integers (avg_batch=1.50) are skipped.
func parseSluiceInfo(text string) (sluiceCounters, error) {
	c := sluiceCounters{by: map[string]int64{}, node: map[string]int64{}, durations: map[int64]int64{}}
	f := infoFields(text)
	for _, v := range []struct {
		name string
		dst  *int64
	}{
		{"decisions", &c.decisions}, {"allowed", &c.allowed}, {"rejected", &c.rejected},
		{"total_connections_received", &c.connections}, {"connected_clients", &c.connected},
	} {
		n, err := strconv.ParseInt(f[v.name], 10, 64)
		if err != nil {
			return c, fmt.Errorf("sluice INFO: %s is %q, want an integer", v.name, f[v.name])
		}
		*v.dst = n
	}
	for name, val := range f {
		if path, ok := strings.CutPrefix(name, "decided_by_"); ok {
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return c, fmt.Errorf("sluice INFO: %s is %q, want an integer", name, val)
			}
			c.by[strings.ReplaceAll(path, "_", "-")] = n
		}
	}
	for line := range strings.SplitSeq(text, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "request_duration_us:"); ok {
			for field := range strings.SplitSeq(rest, ",") {
				name, val, _ := strings.Cut(field, "=")
				n, err := strconv.ParseInt(val, 10, 64)
				bound, ok := strings.CutPrefix(name, "le_")
				if err != nil || !ok {
					return c, fmt.Errorf("sluice INFO: request_duration_us field %q", field)
				}
				le := int64(-1)
				if bound != "inf" {
					if le, err = strconv.ParseInt(bound, 10, 64); err != nil {
						return c, fmt.Errorf("sluice INFO: request_duration_us bound %q", bound)
					}
				}
				c.durations[le] = n
			}
			continue
		}
		if !strings.HasPrefix(line, "node_") {
			continue
		}
		for field := range strings.SplitSeq(strings.TrimSpace(line), ",") {
			name, val, _ := strings.Cut(field, "=")
			if n, err := strconv.ParseInt(val, 10, 64); err == nil {
				c.node[name] += n
			}
		}
	}
	return c, nil
}

// minus is the counters' change since before; a path or field absent
// from before counts from 0, and one that is 0 after is left out.
func (c sluiceCounters) minus(before sluiceCounters) sluiceCounters {
	sub := func(a, b map[string]int64) map[string]int64 {
		out := map[string]int64{}
		for k, v := range a {
			if d := v - b[k]; d != 0 {
				out[k] = d
			}
		}
		return out
	}
	return sluiceCounters{
		decisions: c.decisions - before.decisions, allowed: c.allowed - before.allowed,
		rejected: c.rejected - before.rejected, connections: c.connections - before.connections,
		connected: c.connected, by: sub(c.by, before.by), node: sub(c.node, before.node),
		durations: sub64(c.durations, before.durations),
	}
}

func sub64(a, b map[int64]int64) map[int64]int64 {
	out := map[int64]int64{}
	for k, v := range a {
		out[k] = v - b[k]
	}
	return out
}

// ownQuantile is the upper bound, in ms, of the histogram bucket that holds
// quantile q of the durations (cumulative counts by bound in µs, -1 for
// +Inf): sluice's own time per request, as /metrics would say it. It is
// NaN without samples and +Inf when the quantile lies past the last bound.
func ownQuantile(durations map[int64]int64, q float64) float64 {
	total := durations[-1]
	if total <= 0 {
		return math.NaN()
	}
	bounds := make([]int64, 0, len(durations))
	for le := range durations {
		if le >= 0 {
			bounds = append(bounds, le)
		}
	}
	slices.Sort(bounds)
	for _, le := range bounds {
		if float64(durations[le]) >= q*float64(total) {
			return float64(le) / 1000
		}
	}
	return math.Inf(1)
}
