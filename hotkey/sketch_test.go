package hotkey

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// snapshot copies every cell of a window.
func snapshot(w *window) []uint32 {
	out := make([]uint32, 0, lines*lineCells)
	for i := range w.cells {
		for j := range w.cells[i] {
			out = append(out, w.cells[i][j].Load())
		}
	}
	return out
}

// The request that first counts in a new second does O(1) work: it writes
// at most the one cache line of its key, not the 262,144 cells of the
// window (the old sketch cleared them all on that request's goroutine).
// The window's stale counts still never show in the new second.
func TestSketchNewSecondTouchesOneLine(t *testing.T) {
	t.Parallel()
	var s sketch
	s.init()
	sec := t0.UnixNano() / 1e9
	at := func(sec int64) int64 { return sec*1e9 + 1 } // just past the start of sec
	// A busy second: every line counts something.
	for h := range uint64(lines) {
		s.add(h|h<<32, at(sec), 3)
	}
	w := &s.win[sec&1]
	before := snapshot(w)
	// Two seconds later the same window counts again: one request.
	key := uint64(12345)<<32 | 777
	if got := s.add(key, at(sec+2), 1); got != 1 {
		t.Fatalf("the first request of a new second estimates %v, want 1 (stale counts showing)", got)
	}
	after := snapshot(w)
	touched, lineTouched := 0, map[int]bool{}
	for i := range before {
		if before[i] != after[i] {
			touched++
			lineTouched[i/lineCells] = true
		}
	}
	t.Logf("the request that crossed into a new second wrote %d cells on %d lines (a line is %d cells; the window %d)",
		touched, len(lineTouched), lineCells, lines*lineCells)
	if touched > lineCells || len(lineTouched) > 1 {
		t.Fatalf("the request that crossed into a new second wrote %d cells on %d lines, want at most one line (%d cells)", touched, len(lineTouched), lineCells)
	}
	// Every other key reads 0 in the new second: nothing stale counts.
	for h := range uint64(lines) {
		if h == key&(lines-1) {
			continue
		}
		if got := s.add(h|h<<32, at(sec+2), 0); got != 0 {
			t.Fatalf("key %d: estimate %v in a second it had no request, want 0", h, got)
		}
	}
	// And the previous second still counts, weighted.
	if got := s.add(5|5<<32, at(sec+1)+int64(time.Second/2), 0); got < 1.49 || got > 1.51 {
		t.Fatalf("half a second after a second with 3 requests: estimate %v, want 1.5", got)
	}
}

// BenchmarkObserveNewSecond compares a request inside a second with the
// one that starts a new second, side by side: with the old sketch, the
// latter cleared a whole window (262,144 cells) before answering.
func BenchmarkObserveNewSecond(b *testing.B) {
	for _, cross := range []bool{false, true} {
		b.Run(map[bool]string{false: "same-second", true: "new-second"}[cross], func(b *testing.B) {
			c := newClock()
			h := newLayer(b, newStore(c), c, Config{})
			p := hotPolicy(limit.HotLease, 1_000_000_000)
			now := t0.Add(time.Millisecond)
			b.ReportAllocs()
			for b.Loop() {
				if cross {
					now = now.Add(time.Second)
				}
				h.Observe("acme", p, now)
			}
		})
	}
}

// A request that raced past a second's boundary (its second is older than
// its line's) is counted nowhere and leaves the newer count alone; a clock
// stepped back further than maxAhead starts the line again.
func TestSketchLateRequest(t *testing.T) {
	t.Parallel()
	var s sketch
	s.init()
	sec := t0.UnixNano() / 1e9
	h := uint64(99)<<32 | 5
	for range 3 {
		s.add(h, sec*1e9+10, 1)
	}
	if got := s.add(h, (sec-2)*1e9+10, 1); got != 0 {
		t.Fatalf("a request two seconds late estimates %v, want 0 (counted nowhere)", got)
	}
	if got := s.add(h, sec*1e9+20, 0); got != 3 {
		t.Fatalf("after a late request the second holds %v, want 3", got)
	}
	back := sec - 2*(maxAhead/2+1)
	if got := s.add(h, back*1e9+10, 1); got != 1 {
		t.Fatalf("after the clock stepped back %ds the key estimates %v, want 1", sec-back, got)
	}
}
