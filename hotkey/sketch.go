package hotkey

import (
	"math"
	"sync/atomic"
)

// The sketch is a blocked count-min sketch: a key's depth counters lie in
// one 64-byte cache line, one in each quarter of it, so that counting a key
// costs one cache miss, not depth. A window is lines × 16 counters of 4
// bytes = 1 MiB, and there are two windows: 2 MiB whatever the number of
// distinct keys. A count is never under-estimated. Each counter gathers
// about total/65,536 of the window's requests besides the key's own, as in
// a 4 × 65,536 sketch; the rows are less independent (two keys sharing a
// line collide in all four rows with probability 1/256), which matters only
// in that a rare cold key can look as busy as a hot neighbour: it then takes
// the hot path, which decides correctly too.
const (
	depth     = 4
	lineCells = 16 // uint32 counters in a cache line
	lines     = 1 << 14
)

// rotating marks a window being cleared for a new second.
const rotating = math.MinInt64

// window counts the requests of one second.
type window struct {
	sec   atomic.Int64 // the second counted; rotating while cleared
	cells *[lines][lineCells]atomic.Uint32
}

// sketch estimates requests per key over a sliding second from the current
// and previous whole seconds, the previous one weighted by the share of it
// still inside the last second. It is safe for concurrent use with atomics
// only: the one goroutine that first sees a new second clears that window
// while the others skip counting into it (those few requests are counted
// nowhere: the estimate errs low for well under a millisecond a second).
type sketch struct {
	win [2]window
}

// init allocates the windows.
func (s *sketch) init() {
	for i := range s.win {
		// A large allocation starts on a page, so lines are cache-aligned.
		s.win[i].cells = new([lines][lineCells]atomic.Uint32)
	}
}

// add counts n requests of key hash h at now (ns) and returns the sliding
// rate in requests per second, these included. n = 0 only reads.
func (s *sketch) add(h uint64, now int64, n uint32) float64 {
	sec := now / 1e9
	w := &s.win[sec&1]
	cur := uint32(0)
	if at := w.sec.Load(); at == sec || (at < sec && at != rotating && s.rotate(w, at, sec)) {
		line, pos := &w.cells[h&(lines-1)], h>>32
		cur = math.MaxUint32
		for i := range depth {
			c := &line[i*4+int(pos>>(2*i))&3]
			var v uint32
			if n == 0 {
				v = c.Load()
			} else {
				v = c.Add(n)
			}
			cur = min(cur, v)
		}
	}
	return float64(cur) + s.prev(h, sec)*(1-float64(now%1e9)/1e9)
}

// prev returns the count of h in the second before sec, 0 when that window
// holds another second.
func (s *sketch) prev(h uint64, sec int64) float64 {
	p := &s.win[(sec-1)&1]
	if p.sec.Load() != sec-1 {
		return 0
	}
	line, pos := &p.cells[h&(lines-1)], h>>32
	v := uint32(math.MaxUint32)
	for i := range depth {
		v = min(v, line[i*4+int(pos>>(2*i))&3].Load())
	}
	return float64(v)
}

// rotate clears w for sec if this goroutine wins the race to do it, and
// reports whether w now counts sec.
func (s *sketch) rotate(w *window, at, sec int64) bool {
	if !w.sec.CompareAndSwap(at, rotating) {
		return w.sec.Load() == sec
	}
	for i := range w.cells {
		for j := range w.cells[i] {
			w.cells[i][j].Store(0)
		}
	}
	w.sec.Store(sec)
	return true
}
