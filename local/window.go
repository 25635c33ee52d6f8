package local

import "github.com/sluice-rl/sluice/limit"

// WindowState is one window key, the hash the window scripts keep: W is
// the start of the current window in µs since the epoch (µs, not an index,
// so that a change of period or tick still compares), C the count taken in
// it, and P the count of the window before it (sliding_window only). The
// zero value is an absent key; a state that counts nothing (C = P = 0) is
// never kept, as the scripts delete it.
type WindowState struct {
	W, C, P int64
}

// windowAt places st at now in windows of length µs, as both window
// scripts do. A clock behind the stored window start is read as that start
// (the key stays in its window, as a bucket never refills backwards). The
// stored counts belong to the new window that contains W: kept when that is
// the current window (start), moved to the previous one when W is in the
// window before, forgotten when older. Counts above maxCount (a lowered limit)
// are clamped to it. It returns t, the clock used (max(now, W)).
func windowAt(st *WindowState, length, maxCount, now int64) (t, start, c, p int64) {
	t = now
	present := *st != WindowState{}
	if present && st.W > t {
		t = st.W
	}
	start = floorDiv(t, length) * length
	if present {
		switch {
		case st.W >= start:
			c, p = st.C, st.P
		case st.W >= start-length:
			p = st.C
		}
	}
	return t, start, min(c, maxCount), min(p, maxCount)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// decideWindow is what both window algorithms do with a count c of which
// room tokens fit now (room may be negative): OpReturn lowers c by cost,
// never below 0, and an OpReturn of a negative cost (OpAdjust's spend)
// raises it by -cost without a check, up to lim (a window owes nothing
// past itself: it admits nothing more until it ends); OpClaim takes as many of cost as fit, and when none
// does, retry(1) says when one will; OpTake and OpPeek admit cost when it
// fits (OpTake adding it to c), else retry(cost) says when it will, unless
// cost > lim, which never fits (RetryAfterMs -1). It returns the result,
// the count after it and whether the count changed (and must be written).
func decideWindow(lim, c, room, cost int64, op limit.Op, retry func(need int64) int64) (limit.Result, int64, bool) {
	res := limit.Result{Limit: lim, RetryAfterMs: -1}
	switch {
	case op == limit.OpReturn && cost < 0: // OpAdjust's spend: no check, up to lim
		res.Allowed = true
		if c >= lim || -cost >= lim-c { // not c − cost: it may overflow
			return res, max(c, lim), true
		}
		return res, c - cost, true
	case op == limit.OpReturn:
		res.Allowed = true
		return res, max(0, c-cost), true
	case op == limit.OpClaim:
		res.Granted = max(0, min(cost, room))
		if res.Granted == 0 {
			res.RetryAfterMs = retry(1)
			return res, c, false
		}
		res.Allowed = true
		return res, c + res.Granted, true
	case cost > lim:
		return res, c, false
	case cost > room:
		res.RetryAfterMs = retry(cost)
		return res, c, false
	}
	res.Allowed = true
	if op == limit.OpTake {
		return res, c + cost, true
	}
	return res, c, false
}

// TakeFixedWindow decides op for cost on st at now (µs since the epoch), as
// fixed_window.lua does, and reports whether st changed. Windows are
// w.Ticks×w.Tick µs aligned to the epoch and admit w.Limit each.
//
// Allowed when c + cost <= limit (c the count of the current window);
// Remaining is limit − c after the decision; RetryAfterMs is -1 when
// allowed or cost > limit, else the ms until the window ends, rounded up;
// ResetAfterMs is the ms until the window ends when c > 0 after the
// decision, else 0. OpClaim takes up to cost (a claim that gets nothing
// retries when the window ends); OpReturn lowers c by cost, never below 0.
func TakeFixedWindow(st *WindowState, w limit.Window, cost, now int64, op limit.Op) (limit.Result, bool) {
	return takeFixedWindow(st, w, cost, now, op, 0)
}

// takeFixedWindow is TakeFixedWindow with the window an OpReturn names
// (from, its start in µs; 0: the current one): a return to a window that
// has closed gives nothing back.
func takeFixedWindow(st *WindowState, w limit.Window, cost, now int64, op limit.Op, from int64) (limit.Result, bool) {
	length := w.Ticks * w.Tick
	_, start, c, _ := windowAt(st, length, w.Limit, now)
	left := ceilDiv(start+length-now, 1000)                      // ms until the window ends, >= 1
	closed := op == limit.OpReturn && from != 0 && from != start // nothing to give back
	if closed {
		cost = 0
	}
	raw := c // the count as stored: above the limit after a lowered limit
	if *st != (WindowState{}) && st.W >= start {
		raw = st.C
	}
	res, c, write := decideWindow(w.Limit, c, w.Limit-c, cost, op, func(int64) int64 { return left })
	write = write && !closed
	res.Window = start
	if write {
		// a write under a lowered limit keeps the stored count above it
		// (an instance still on the higher limit must not admit what this
		// write would forget): a spend never lowers it, a return lowers
		// what is stored
		sc := c
		if op == limit.OpReturn && raw > c {
			if cost < 0 {
				sc = raw
			} else {
				sc = max(0, raw-cost)
			}
		}
		if sc == 0 {
			*st = WindowState{}
		} else {
			*st = WindowState{W: start, C: sc}
		}
	}
	res.Remaining = max(0, w.Limit-c)
	if c > 0 {
		res.ResetAfterMs = left
	}
	return res, write
}

// TakeSlidingWindow decides op for cost on st at now (µs since the epoch),
// as sliding_window.lua does, and reports whether st changed.
//
// With P = w.Ticks, e the ticks elapsed in the current window, p the
// previous window's count and c the current one's, the estimate times P is
// weighted = p×(P−e) + c×P, all exact integers. Allowed when weighted +
// cost×P <= limit×P; Remaining is floor((limit×P − weighted)/P) after the
// decision, at least 0; RetryAfterMs is -1 when allowed or cost > limit,
// else the exact time until weighted + cost×P <= limit×P holds (as p
// decays within this window, or else in the next one, where c becomes the
// previous count), rounded up to ms; ResetAfterMs is the time until the
// estimate is 0: the end of the next window if c > 0, else the end of this
// one if p > 0, else 0, rounded up. OpClaim takes as many of cost as fit
// (a claim that gets nothing retries when 1 fits); OpReturn lowers c by
// cost, never below 0.
func TakeSlidingWindow(st *WindowState, w limit.Window, cost, now int64, op limit.Op) (limit.Result, bool) {
	return takeSlidingWindow(st, w, cost, now, op, 0)
}

// takeSlidingWindow is TakeSlidingWindow with the window an OpReturn names
// (from, its start in µs; 0: the current one): the current window's count
// is lowered when it is the current one, the previous window's when it is
// the one before, and nothing is given back to an older window.
func takeSlidingWindow(st *WindowState, w limit.Window, cost, now int64, op limit.Op, from int64) (limit.Result, bool) {
	P, tick := w.Ticks, w.Tick
	t, start, c, p := windowAt(st, P*tick, w.Limit, now)
	if op == limit.OpReturn && from != 0 && from != start {
		// Taken in the window before (its count is now p: lower it) or
		// earlier (nothing to give back); the reply is a peek of nothing.
		changed := from == start-P*tick
		if changed {
			if p = max(0, p-cost); c == 0 && p == 0 {
				*st = WindowState{}
			} else {
				*st = WindowState{W: start, C: c, P: p}
			}
		}
		res, _ := takeSlidingWindow(st, w, 0, now, limit.OpPeek, 0)
		res.Allowed, res.RetryAfterMs = true, -1
		return res, changed
	}
	ws := start / tick          // window start, ticks
	e := floorDiv(t, tick) - ws // ticks elapsed, 0..P-1
	full := w.Limit * P         // the limit times P
	weighted := p*(P-e) + c*P
	// retryAt is the first tick at which need more fits, when it does not now.
	retryAt := func(need int64) int64 {
		if r := full - need - c*P; p > 0 && r >= 0 {
			return ws + P - r/p // p×(P−e') <= r within this window
		}
		return ws + P + max(0, P-(full-need)/c) // c×(P−e'') <= full−need in the next
	}
	// ⌊(full − weighted)/P⌋ tokens fit now: cost×P <= full − weighted.
	res, c, write := decideWindow(w.Limit, c, floorDiv(full-weighted, P), cost, op, func(need int64) int64 {
		return ceilDiv(retryAt(need*P)*tick-now, 1000)
	})
	weighted = p*(P-e) + c*P
	res.Remaining = max(0, (full-weighted)/P)
	res.Window = start
	switch {
	case c > 0:
		res.ResetAfterMs = ceilDiv((ws+2*P)*tick-now, 1000)
	case p > 0:
		res.ResetAfterMs = ceilDiv((ws+P)*tick-now, 1000)
	}
	if write {
		if c == 0 && p == 0 {
			*st = WindowState{}
		} else {
			*st = WindowState{W: start, C: c, P: p}
		}
	}
	return res, write
}
