package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// loadSpec is the load of one row or arm of an experiment.
type loadSpec struct {
	key         string
	workers     int // goroutines per client
	pipeline    int // RL.TAKE per pipeline
	duration    time.Duration
	maxRequests int64           // over all clients
	limit       int64           // the policy's: a reply with another is counted in wrongLimit
	stop        <-chan struct{} // closed: no new request; nil never is
}

// takeTally counts RL.TAKE replies: the decisions, by allowed, limit and
// decided_by, and the errors. The zero value needs by made.
type takeTally struct {
	admitted, rejected, errors int64
	wrongLimit                 int64 // replies whose limit is not the policy's
	by                         map[string]int64
	firstErr                   error
}

// count tallies one reply: an error (error reply, broken connection or a
// malformed reply) or a decision with its limit (want burst) and decided_by; it
// reports whether the reply admitted.
func (t *takeTally) count(v []any, err error, burst int64) (admitted bool) {
	if err == nil {
		err = checkTake(v)
	}
	if err != nil {
		t.errors++
		if t.firstErr == nil {
			t.firstErr = err
		}
		return false
	}
	admitted = v[0] == int64(1)
	if admitted {
		t.admitted++
	} else {
		t.rejected++
	}
	if v[1] != burst {
		t.wrongLimit++
	}
	t.by[v[5].(string)]++
	return admitted
}

// merge adds o's counts to t's; t's first error stays first.
func (t *takeTally) merge(o *takeTally) {
	t.admitted += o.admitted
	t.rejected += o.rejected
	t.errors += o.errors
	t.wrongLimit += o.wrongLimit
	for k, v := range o.by {
		t.by[k] += v
	}
	if t.firstErr == nil {
		t.firstErr = o.firstErr
	}
}

// loadResult is what the replies of one arm said.
type loadResult struct {
	takeTally         // wrongLimit: against loadSpec.limit
	perClient         []int64
	admittedPerClient []int64
	lat               []time.Duration // round trip of each pipeline
	first, last       time.Time       // first request sent, last reply received
}

// elapsed runs from the first request sent to the last reply received; 0
// when nothing was sent.
func (ld loadResult) elapsed() time.Duration {
	if ld.first.IsZero() {
		return 0
	}
	return ld.last.Sub(ld.first)
}

// firstError is the first error's text, "" for none.
func (ld loadResult) firstError() string {
	if ld.firstErr == nil {
		return ""
	}
	return ld.firstErr.Error()
}

// worker is the tally of one goroutine, merged when all are done.
type worker struct {
	takeTally
	lat         []time.Duration
	first, last time.Time
}

// drive sends pipelines of RL.TAKE spec.key 1 from spec.workers
// goroutines on each client until spec.duration has passed, spec.maxRequests
// have been sent or ctx is done, and counts every reply. A request in
// flight at the end is waited for, so every request sent is counted.
func drive(ctx context.Context, clients []*redis.Client, spec loadSpec) loadResult {
	var sent atomic.Int64
	end := time.Now().Add(spec.duration)
	workers := make([][]*worker, len(clients))
	var wg sync.WaitGroup
	for ci, c := range clients {
		workers[ci] = make([]*worker, spec.workers)
		for wi := range spec.workers {
			w := &worker{takeTally: takeTally{by: map[string]int64{}}}
			workers[ci][wi] = w
			wg.Go(func() { w.run(ctx, c, spec, end, &sent) })
		}
	}
	wg.Wait()

	out := loadResult{takeTally: takeTally{by: map[string]int64{}}, perClient: make([]int64, len(clients)), admittedPerClient: make([]int64, len(clients))}
	for ci, ws := range workers {
		for _, w := range ws {
			out.merge(&w.takeTally)
			out.perClient[ci] += w.admitted + w.rejected + w.errors
			out.admittedPerClient[ci] += w.admitted
			out.lat = append(out.lat, w.lat...)
			if !w.first.IsZero() && (out.first.IsZero() || w.first.Before(out.first)) {
				out.first = w.first
			}
			if w.last.After(out.last) {
				out.last = w.last
			}
		}
	}
	return out
}

// run is one goroutine of drive.
func (w *worker) run(ctx context.Context, c *redis.Client, spec loadSpec, end time.Time, sent *atomic.Int64) {
	pipe := c.Pipeline()
	cmds := make([]*redis.Cmd, spec.pipeline)
	for ctx.Err() == nil && time.Now().Before(end) && !closed(spec.stop) {
		if sent.Add(int64(spec.pipeline)) > spec.maxRequests {
			return
		}
		for i := range cmds {
			cmds[i] = pipe.Do(ctx, "RL.TAKE", spec.key, 1)
		}
		start := time.Now()
		if w.first.IsZero() {
			w.first = start
		}
		_, _ = pipe.Exec(ctx) // each command carries its own error
		w.last = time.Now()
		w.lat = append(w.lat, w.last.Sub(start))
		for _, cmd := range cmds {
			v, err := cmd.Slice()
			w.count(v, err, spec.limit)
		}
	}
}

// closed reports whether ch is closed; a nil ch never is.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

var errTakeShape = errors.New("bench: RL.TAKE reply is not [allowed, limit, remaining, retry_after_ms, reset_after_ms, decided_by]")

// checkTake checks the shape of an RL.TAKE reply: five integers, allowed
// 0 or 1, and a decided_by string.
func checkTake(v []any) error {
	if len(v) != 6 {
		return fmt.Errorf("%w: %d elements: %v", errTakeShape, len(v), v)
	}
	for i := range 5 {
		if _, ok := v[i].(int64); !ok {
			return fmt.Errorf("%w: element %d is %T: %v", errTakeShape, i+1, v[i], v)
		}
	}
	if a := v[0].(int64); a != 0 && a != 1 {
		return fmt.Errorf("%w: allowed is %d: %v", errTakeShape, a, v)
	}
	if _, ok := v[5].(string); !ok {
		return fmt.Errorf("%w: element 6 is %T: %v", errTakeShape, v[5], v)
	}
	return nil
}

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of d in
// milliseconds; NaN when d is empty. d is sorted in place.
func Percentile(d []time.Duration, p float64) float64 {
	if len(d) == 0 || p <= 0 || p > 100 {
		return math.NaN()
	}
	slices.Sort(d)
	i := int(math.Ceil(p/100*float64(len(d)))) - 1
	return float64(d[max(i, 0)]) / float64(time.Millisecond)
}
