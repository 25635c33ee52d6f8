package layercheck

import (
	"slices"
	"time"
)

// Hold is one slot RL.ACQUIRE granted, as its holder saw it: the acquire
// sent and answered, the slot's TTL, and, once released, the release
// sent. The store granted it at some moment in [SentA, RecvA] and freed it
// at the release or at the grant plus TTL, whichever came first.
type Hold struct {
	SentA, RecvA time.Time
	TTL          time.Duration
	SentR        time.Time // zero: never released
}

// certain is the time the slot was certainly held: from the acquire's
// answer to the earlier of the release's send and the acquire's send plus
// the TTL (the grant was no earlier). Empty (ok false) when that is no
// time at all.
func (h Hold) certain() (from, to time.Time, ok bool) {
	to = h.SentA.Add(h.TTL)
	if !h.SentR.IsZero() && h.SentR.Before(to) {
		to = h.SentR
	}
	return h.RecvA, to, h.RecvA.Before(to)
}

// CheckSlots returns the most holds certainly held at one moment, and a
// moment it happened: a concurrency policy's invariant is that it never
// exceeds the limit. Timing never makes a false violation: each hold
// counts only while it was held whatever the latencies.
func CheckSlots(holds []Hold) (most int, at time.Time) {
	type event struct {
		at   time.Time
		open int
	}
	var ev []event
	for _, h := range holds {
		if from, to, ok := h.certain(); ok {
			ev = append(ev, event{from, 1}, event{to, -1})
		}
	}
	slices.SortFunc(ev, func(x, y event) int {
		if c := x.at.Compare(y.at); c != 0 {
			return c
		}
		return x.open - y.open // a close at the instant of an open goes first
	})
	n := 0
	for _, e := range ev {
		n += e.open
		if n > most {
			most, at = n, e.at
		}
	}
	return most, at
}
