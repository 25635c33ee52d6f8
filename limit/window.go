package limit

import (
	"errors"
	"fmt"
	"time"
)

// Window is a window algorithm's parameters in exact integers. Windows are
// Ticks ticks of Tick µs each, aligned to the Unix epoch (window n covers
// [n×Ticks×Tick, (n+1)×Ticks×Tick) µs), and admit at most Limit per window.
//
// The sliding window weighs the previous window's count by the share of it
// still inside the sliding window, which takes products up to 3 × Limit ×
// Ticks: Tick is the finest of 1µs, 1ms and 1s that divides the period and
// keeps that below MaxScaled, so a 1-day window holds limits up to about
// 34,000 at µs resolution and 34 million at ms resolution.
type Window struct {
	Limit int64 // per window
	Ticks int64 // window length in ticks
	Tick  int64 // µs per tick
}

// Window returns the policy's window parameters, or an error when the
// policy cannot be represented exactly.
func (p *Policy) Window() (Window, error) {
	if p.Limit < 1 {
		return Window{}, errors.New("limit must be at least 1")
	}
	if p.Period < time.Microsecond || p.Period%time.Microsecond != 0 {
		return Window{}, errors.New("period must be a whole number of microseconds, at least 1µs")
	}
	us := int64(p.Period / time.Microsecond)
	if p.Period > 366*24*time.Hour {
		return Window{}, errors.New("a window period must be at most 366 days")
	}
	if p.Limit > MaxScaled/4 {
		return Window{}, fmt.Errorf("limit %d is too large to count exactly", p.Limit)
	}
	if p.Algorithm != SlidingWindow {
		return Window{Limit: p.Limit, Ticks: us, Tick: 1}, nil
	}
	for _, tick := range []int64{1, 1000, 1_000_000} {
		if us%tick != 0 {
			break
		}
		if ticks := us / tick; ticks <= MaxScaled/4/p.Limit {
			return Window{Limit: p.Limit, Ticks: ticks, Tick: tick}, nil
		}
	}
	return Window{}, fmt.Errorf("sliding_window limit %d per %s needs more than 53 bits of precision; use a shorter period, or a period of whole seconds", p.Limit, p.Period)
}

// Length returns the window length in µs.
func (w Window) Length() int64 { return w.Ticks * w.Tick }
