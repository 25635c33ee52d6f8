package bench

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// regionLoad is one region's part of a paced load: the clients of its
// sluice instances (taken in turn) and its request rate before and after
// the shift.
type regionLoad struct {
	name          string
	clients       []*redis.Client
	before, after float64 // requests/s
}

// pacedSpec is an open-loop load over several regions: each region's
// workers send RL.TAKE key 1 at the region's rate, whatever the replies
// take, so demand is what the lab says and not what latency allows.
type pacedSpec struct {
	key      string
	regions  []regionLoad
	workers  int // per region; each has one request in flight
	duration time.Duration
	// shift is when the rates change from before to after, from the
	// start; 0 or past duration means never.
	shift       time.Duration
	maxRequests int64 // over every region
	limit       int64 // the policy's: a reply with another is counted in wrongLimit
	bin         time.Duration
	// at, when set, is called from one goroutine at each offset from the
	// start (in order) while the load runs: the experiment's events.
	at []event
}

// event is something an experiment does at an offset of a paced load.
type event struct {
	after time.Duration
	do    func()
}

// regionTally is what one region's requests saw.
type regionTally struct {
	takeTally
	sent                   int64
	lat                    []time.Duration
	sentBins, admittedBins []int64 // by the time each request was sent
}

// pacedResult is a paced load's tallies, one per region, in the order of
// pacedSpec.regions.
type pacedResult struct {
	regions []*regionTally
	start   time.Time
	// elapsed runs from the start to the last reply received.
	elapsed time.Duration
	bin     time.Duration
	late    int64 // requests sent more than a second after their time
}

// drivePaced runs spec and waits for every request sent. Each worker of a
// region sends one request every workers/rate seconds, staggered so that
// the region's requests are evenly spread; a worker whose reply came too
// late for its next turn sends at once, and one more than a second behind
// skips the turns it missed (counted in late) rather than bursting.
func drivePaced(ctx context.Context, spec pacedSpec) pacedResult {
	p := &pacer{spec: spec, nbins: int(spec.duration/spec.bin) + 2, start: time.Now()}
	res := pacedResult{start: p.start, bin: spec.bin}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, rl := range spec.regions {
		t := p.tally()
		res.regions = append(res.regions, t)
		for w := range spec.workers {
			c := rl.clients[w%len(rl.clients)]
			wg.Go(func() {
				mine := p.worker(ctx, rl, w, c)
				mu.Lock()
				t.merge(mine)
				mu.Unlock()
			})
		}
	}
	events := make(chan struct{})
	go func() {
		defer close(events)
		for _, e := range spec.at {
			if sleep(ctx, time.Until(p.start.Add(e.after))) != nil {
				return
			}
			e.do()
		}
	}()
	wg.Wait()
	<-events
	res.elapsed = time.Duration(p.last.Load())
	res.late = p.late.Load()
	return res
}

// pacer is one drivePaced run, shared by its workers.
type pacer struct {
	spec  pacedSpec
	nbins int
	start time.Time
	sent  atomic.Int64 // requests, over every region
	late  atomic.Int64 // turns skipped
	last  atomic.Int64 // ns after start of the last reply
}

func (p *pacer) tally() *regionTally {
	return &regionTally{takeTally: takeTally{by: map[string]int64{}}, sentBins: make([]int64, p.nbins), admittedBins: make([]int64, p.nbins)}
}

// rate is rl's requests/s at an offset from the start.
func (p *pacer) rate(rl regionLoad, at time.Duration) float64 {
	if p.spec.shift > 0 && at >= p.spec.shift {
		return rl.after
	}
	return rl.before
}

// worker is worker w of region rl, sending on c until the load's end; it
// returns what its requests saw.
func (p *pacer) worker(ctx context.Context, rl regionLoad, w int, c *redis.Client) *regionTally {
	spec := p.spec
	mine := p.tally()
	r0 := p.rate(rl, 0)
	next := time.Duration(0)
	if r0 > 0 {
		next = time.Duration(float64(w) / r0 * float64(time.Second))
	}
	for ctx.Err() == nil && next < spec.duration {
		r := p.rate(rl, next)
		if r <= 0 {
			next = max(next+spec.bin, spec.shift)
			continue
		}
		if err := sleep(ctx, time.Until(p.start.Add(next))); err != nil {
			break
		}
		if p.sent.Add(1) > spec.maxRequests {
			break
		}
		at := time.Since(p.start)
		v, err := c.Do(ctx, "RL.TAKE", spec.key, 1).Slice()
		lat := time.Since(p.start) - at
		mine.count(v, err, at, lat, spec)
		done := int64(at + lat)
		for {
			old := p.last.Load()
			if done <= old || p.last.CompareAndSwap(old, done) {
				break
			}
		}
		next = p.nextTurn(rl, next, r)
	}
	return mine
}

// nextTurn is when a worker whose turn was at next, at rate r, sends
// again.
func (p *pacer) nextTurn(rl regionLoad, next time.Duration, r float64) time.Duration {
	spec := p.spec
	was := next
	next += time.Duration(float64(spec.workers) / r * float64(time.Second))
	if spec.shift > 0 && was < spec.shift && next > spec.shift {
		// Keep the worker's place in its interval
		// across the shift, so that the new rate
		// holds from the shift on, not one old
		// interval later.
		if r2 := p.rate(rl, spec.shift); r2 > 0 {
			next = spec.shift + time.Duration(float64(next-spec.shift)*r/r2)
		}
	}
	if behind := time.Since(p.start) - next; behind > time.Second {
		skipped := int64(behind.Seconds() * r / float64(spec.workers))
		p.late.Add(skipped)
		next += time.Duration(float64(skipped) * float64(spec.workers) / r * float64(time.Second))
	}
	return next
}

// count tallies one reply to a request sent at, lat before it came.
func (t *regionTally) count(v []any, err error, at, lat time.Duration, spec pacedSpec) {
	b := min(int(at/spec.bin), len(t.sentBins)-1)
	t.sent++
	t.sentBins[b]++
	t.lat = append(t.lat, lat)
	if t.takeTally.count(v, err, spec.limit) {
		t.admittedBins[b]++
	}
}

// merge adds o's tally to t's.
func (t *regionTally) merge(o *regionTally) {
	t.takeTally.merge(&o.takeTally)
	t.sent += o.sent
	t.lat = append(t.lat, o.lat...)
	for i := range t.sentBins {
		t.sentBins[i] += o.sentBins[i]
		t.admittedBins[i] += o.admittedBins[i]
	}
}

// admittedBetween counts the admissions of requests sent in [from, to).
func (t *regionTally) admittedBetween(bin, from, to time.Duration) int64 {
	return sumBins(t.admittedBins, bin, from, to)
}

// sentBetween counts the requests sent in [from, to).
func (t *regionTally) sentBetween(bin, from, to time.Duration) int64 {
	return sumBins(t.sentBins, bin, from, to)
}

func sumBins(bins []int64, bin, from, to time.Duration) int64 {
	var n int64
	for b := max(int(from/bin), 0); b < min(int(to/bin), len(bins)); b++ {
		n += bins[b]
	}
	return n
}

// followTime is how long after the shift region ri's share of the
// admissions, over a sliding window, came within tolerance (in share
// points: 0.05 is ±5 points) of its share of the requests sent in the same window, and
// stayed there for hold (or to the end, if sooner): the time the
// allocation takes to follow a shift of demand. The windows start every
// bin from the shift, the last one ends at end; the time is the end of
// the first window of the run that settled, so it is at least one window.
// -1 when it never settled. strays counts the windows after that run, one
// every window (not sliding), whose share left the band again.
func followTime(res pacedResult, ri int, shift, window, end time.Duration, tolerance float64, hold time.Duration) (took time.Duration, strays, after int) {
	within := func(from time.Duration) bool {
		var adm, all, mine, sent int64
		for i, t := range res.regions {
			a, s := t.admittedBetween(res.bin, from, from+window), t.sentBetween(res.bin, from, from+window)
			adm += a
			sent += s
			if i == ri {
				all, mine = a, s
			}
		}
		share, want := ratio(float64(all), float64(adm)), ratio(float64(mine), float64(sent))
		return !math.IsNaN(share) && !math.IsNaN(want) && math.Abs(share-want) <= tolerance+1e-9
	}
	took = -1
	var run time.Duration = -1 // start of the current run of windows within the band
	var settledFrom time.Duration
	for from := shift; from+window <= end; from += res.bin {
		if !within(from) {
			run = -1
			continue
		}
		if run < 0 {
			run = from
		}
		if from-run >= hold || from+res.bin+window > end {
			took, settledFrom = run+window-shift, run+hold
			break
		}
	}
	if took < 0 {
		return -1, 0, 0
	}
	for from := settledFrom + window; from+window <= end; from += window {
		after++
		if !within(from) {
			strays++
		}
	}
	return took, strays, after
}
