package cluster

import (
	"runtime/metrics"
	"syscall"
	"testing"
)

// schedCounts are this process's scheduler counts: goroutines made to
// run (the count of /sched/latencies:seconds, which the runtime samples at
// one transition in eight: a relative measure of goroutine wake-ups), and
// voluntary context switches of its threads (a thread that parked on a
// futex or in the poller: the system-call side of a wake-up).
type schedCounts struct{ runs, vcsw float64 }

func readSched(b *testing.B) schedCounts {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	var runs float64
	if s[0].Value.Kind() == metrics.KindFloat64Histogram {
		for _, c := range s[0].Value.Float64Histogram().Counts {
			runs += float64(c)
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return schedCounts{runs: runs, vcsw: float64(ru.Nvcsw)}
}

// reportSched reports the scheduler counts since c0 per decision.
func reportSched(b *testing.B, c0 schedCounts, decisions float64) {
	c1 := readSched(b)
	b.ReportMetric((c1.runs-c0.runs)/decisions, "sampled-goroutine-runs/decision")
	b.ReportMetric((c1.vcsw-c0.vcsw)/decisions, "vcsw/decision")
}

// unitCounts are how a store's units went out, summed over its nodes, and
// the wake-ups the store's scheduling cost them besides a caller's own.
type unitCounts struct{ units, own, queued, wakes float64 }

func unitsOf(s *Store) unitCounts {
	c := countsOf(s)
	var parks int64
	s.queues.Range(func(_, v any) bool {
		parks += v.(*nodeQueue).parks.Load()
		return true
	})
	own := c.inline + c.headSent - c.handedOff
	units := c.inline + c.headSent + c.passengers + c.queued
	// A unit its caller did not send costs that caller a wake-up when it
	// is answered; a pipeline handed off, a goroutine started.
	wakes := parks + c.handedOff + (units - own)
	return unitCounts{float64(units), float64(own), float64(c.queued), float64(wakes)}
}

// reportUnits reports, since u0, the share of units sent by their own
// caller and of those queued for a worker, and the scheduling wake-ups
// per decision.
func reportUnits(b *testing.B, s *Store, u0 unitCounts, decisions float64) {
	u1 := unitsOf(s)
	units := max(1, u1.units-u0.units)
	b.ReportMetric((u1.own-u0.own)/units, "own-sent/unit")
	b.ReportMetric((u1.queued-u0.queued)/units, "worker-queued/unit")
	b.ReportMetric((u1.wakes-u0.wakes)/decisions, "store-wakes/decision")
}
