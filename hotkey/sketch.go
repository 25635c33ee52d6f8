package hotkey

import (
	"math"
	"sync/atomic"
)

// The sketch is a blocked count-min sketch: a key's depth counters lie in
// one 64-byte cache line, so that counting a key costs one cache miss, not
// depth. A line is 16 cells of 4 bytes: 15 counters (rows 0–2 take 4 cells
// each, row 3 the last 3) and the line's stamp, the second its counters
// count. A window is lines × 16 cells = 1 MiB, and there are two windows:
// 2 MiB whatever the number of distinct keys. A count is never
// under-estimated. Each counter of rows 0–2 gathers about total/65,536 of
// the window's requests besides the key's own (row 3 about total/49,152),
// as in a 4 × 65,536 sketch; the rows are less independent (two keys
// sharing a line collide in all four rows with probability about 1/192), which
// matters only in that a rare cold key can look as busy as a hot
// neighbour: it then takes the hot path, which decides correctly too.
const (
	depth     = 4
	lineCells = 16 // uint32 cells in a cache line
	lines     = 1 << 14
	stampCell = lineCells - 1
)

// Stamps. A line's stamp is its second modulo 2^30 with bit 30 set, so it
// is never 0 (a line never counted in: its counters are zero) nor
// resetting (bit 31: a goroutine is zeroing the line for a new second).
const (
	never     = 0
	resetting = 1 << 31
	stampBits = 30
	stampMask = 1<<stampBits - 1
)

// stampOf returns the stamp of second sec.
func stampOf(sec int64) uint32 { return uint32(sec)&stampMask | 1<<stampBits }

// maxAhead is how far, in seconds, a line's stamp may be ahead of a
// request's second for the request to be counted nowhere rather than
// restart the line: a request that raced past a second's boundary, or a
// clock stepped back a little. A line further ahead (a clock stepped back
// further) is reset to the request's second.
const maxAhead = 60

// ahead reports whether stamp a is of a second up to maxAhead after the
// second of stamp b.
func ahead(a, b uint32) bool {
	d := (a - b) & stampMask
	return a != never && d != 0 && d <= maxAhead
}

// cells returns the indexes in a line of a key's counters, one per row,
// from the key's position pos: rows 0–2 take 2 bits each, row 3 maps the
// next 8 bits onto its 3 cells.
func cells(pos uint64) [depth]uint64 {
	return [depth]uint64{pos & 3, 4 + pos>>2&3, 8 + pos>>4&3, 12 + (pos>>6&0xff)*3>>8}
}

// window counts requests in the seconds of one parity; each line says
// which second it holds.
type window struct {
	cells *[lines][lineCells]atomic.Uint32
}

// sketch estimates requests per key over a sliding second from the current
// and previous whole seconds, the previous one weighted by the share of it
// still inside the last second. It is safe for concurrent use with atomics
// only, and no request clears a window: the first request that counts in a
// line in a new second zeroes that one line (15 counters) and stamps it,
// O(1) work; a line untouched in a second reads as zero for it, whatever
// its counters hold from an older one. A request that finds its line being
// zeroed by another, or stamped with a later second than its own (it
// raced past the boundary: see maxAhead), is counted nowhere: the estimate
// errs low by those few requests, never high.
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
	line, pos := &s.win[sec&1].cells[h&(lines-1)], h>>32
	st := stampOf(sec)
	cur := uint32(0)
	at := line[stampCell].Load()
	if at == st || (n != 0 && at != resetting && !ahead(at, st) && reset(line, at, st)) {
		cur = math.MaxUint32
		for _, i := range cells(pos) {
			c := &line[i]
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

// prev returns the count of h in the second before sec, 0 when its line
// holds another second.
func (s *sketch) prev(h uint64, sec int64) float64 {
	line, pos := &s.win[(sec-1)&1].cells[h&(lines-1)], h>>32
	if line[stampCell].Load() != stampOf(sec-1) {
		return 0
	}
	v := uint32(math.MaxUint32)
	for _, i := range cells(pos) {
		v = min(v, line[i].Load())
	}
	return float64(v)
}

// reset zeroes line for the second of stamp st if this goroutine wins the
// race to do it (the line held stamp at), and reports whether the line now
// counts st.
func reset(line *[lineCells]atomic.Uint32, at, st uint32) bool {
	if !line[stampCell].CompareAndSwap(at, resetting) {
		return line[stampCell].Load() == st
	}
	for i := range stampCell {
		line[i].Store(0)
	}
	line[stampCell].Store(st)
	return true
}
