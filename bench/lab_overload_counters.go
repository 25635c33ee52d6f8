package bench

import (
	"context"
	"fmt"
	"strconv"
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
func (d overloadDriver) tenant(ctx context.Context, in invocation, key string, burst, rate int64, share float64) (OverloadTenantRow, error) {
	row := OverloadTenantRow{Clients: in.Clients, Key: key, Requests: in.Requests}
	delta, _, res, took, err := d.throughSluice(ctx, in)
	if err != nil {
		return row, err
	}
	row.Result, row.Elapsed, row.Connections = res, took, delta.connections
	row.Admitted, row.Rejected, row.DecidedBy = delta.allowed, delta.rejected, delta.by
	row.BreakerOpens = delta.node["breaker_opens"]
	row.Window = time.Duration(float64(in.Requests) / res.RPS * float64(time.Second))
	row.Budget = labBudget(burst, rate, row.Window)
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

func (d overloadDriver) sluiceInfo(ctx context.Context) (sluiceCounters, error) {
	text, err := d.sluice.Do(ctx, "INFO").Text()
	if err != nil {
		return sluiceCounters{}, fmt.Errorf("INFO on sluice: %w", err)
	}
	return parseSluiceInfo(text)
}
