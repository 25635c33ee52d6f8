package local

import (
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// kindCalendar (state.go) is the family of a calendar window's state
// (lua/state.lua's tag c): a WindowState whose W is the END of the window
// its count was taken in, so that a fixed_window's state (W a start) is
// never read as one, nor the other way round.

// kindOfPolicy is kindOf for p, whose calendar makes its own kind.
func kindOfPolicy(p *limit.Policy) kind {
	if p.Calendar != "" {
		return kindCalendar
	}
	return kindOf(p.Algorithm)
}

// decideCalendar decides by p's calendar on st (its Window field).
func decideCalendar(st *State, p *limit.Policy, cost, now, sluiceNow int64, op limit.Op, from int64) (limit.Result, bool, error) {
	cw, err := p.CalendarAt(time.UnixMicro(sluiceNow))
	if err != nil {
		return limit.Result{}, false, err
	}
	res, changed := TakeCalendar(&st.Window, cw, cost, now, op, from)
	return res, changed, nil
}

// TakeCalendar decides op for cost on st at now (µs since the epoch, the
// store's clock) in the calendar windows cw, as calendar.lua does, and
// reports whether st changed. The window is the one of cw.Ends that now is
// in: the one ending at cw.Start, the one sluice's clock is in, or the
// next; st.W names a window by its end. The count of st is the window's
// when st.W lies in it (after the window's start, when that is known), so
// a count kept under another calendar moves into the window holding its
// end, clamped to the limit; a state of a later window of the three keeps
// the key there (a clock that went back); a state at or before the start
// is forgotten. A clock past the last end finds no window: every op is
// refused and nothing is written. Otherwise the reply is fixed_window's,
// Result.Window the window's end, which an OpReturn names in from (0: the
// current window; a return to another window gives nothing back).
func TakeCalendar(st *WindowState, cw limit.CalendarWindow, cost, now int64, op limit.Op, from int64) (limit.Result, bool) {
	ends := cw.Ends()
	end, lo, known := ends[0], int64(0), false // the window's end; its start when known
	switch {
	case now >= ends[1]:
		end, lo, known = ends[2], ends[1], true
	case now >= ends[0]:
		end, lo, known = ends[1], ends[0], true
	}
	beyond := now >= ends[2]
	var c int64
	if *st != (WindowState{}) {
		switch w := st.W; {
		case w > end && (w == ends[1] || w == ends[2]):
			end, c = w, st.C
		case !known || w > lo:
			c = st.C
		}
	}
	if c > cw.Limit || beyond {
		c = cw.Limit
	}
	left := max(1, ceilDiv(end-now, 1000)) // ms until the window ends
	retry := func(int64) int64 { return left }
	var res limit.Result
	write := false
	switch {
	case !beyond && (op != limit.OpReturn || from == 0 || from == end):
		res, c, write = decideWindow(cw.Limit, c, cw.Limit-c, cost, op, retry)
	case op != limit.OpReturn:
		res, c, _ = decideWindow(cw.Limit, c, 0, cost, op, retry)
	default: // a return to a window that has closed gives nothing back
		res = limit.Result{Allowed: true, Limit: cw.Limit, RetryAfterMs: -1}
	}
	res.Window = end
	res.Remaining = max(0, cw.Limit-c)
	if c > 0 {
		res.ResetAfterMs = left
	}
	if write {
		if c == 0 {
			*st = WindowState{}
		} else {
			*st = WindowState{W: end, C: c}
		}
	}
	return res, write
}
