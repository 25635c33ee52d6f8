package limit

import (
	"errors"
	"fmt"
	"time"
)

// Calendar is the unit of a calendar window (Policy.Calendar): a fixed
// window whose windows are the days, weeks (Monday to Sunday), months or
// years of a time zone, daylight-saving changes included, so that a day is
// 23, 24 or 25 hours long. The zero value means none.
type Calendar string

// The calendar units.
const (
	CalendarDay   Calendar = "day"
	CalendarWeek  Calendar = "week"
	CalendarMonth Calendar = "month"
	CalendarYear  Calendar = "year"
)

// Calendars lists every calendar unit, the shortest first.
var Calendars = []Calendar{CalendarDay, CalendarWeek, CalendarMonth, CalendarYear}

// Nominal returns the unit's usual length, 24h, 7d, 30d or 365d: what a
// door that can show only a fixed period shows (RateLimit-Policy's w,
// Envoy's unit). Decisions never use it.
func (c Calendar) Nominal() time.Duration {
	switch c {
	case CalendarDay:
		return 24 * time.Hour
	case CalendarWeek:
		return 7 * 24 * time.Hour
	case CalendarMonth:
		return 30 * 24 * time.Hour
	case CalendarYear:
		return 365 * 24 * time.Hour
	}
	return 0
}

// CalendarLenBits is how the two window lengths of a CalendarWindow share
// one script argument: Len << CalendarLenBits | Next, both in seconds and
// below 1 << CalendarLenBits (388 days), so the sum stays an exact
// integer below 2^50 in a Lua number.
const CalendarLenBits = 25

// CalendarWindow is a calendar policy's windows around one instant of
// sluice's clock, in exact integers: the window that instant is in starts
// at Start and lasts Len seconds, the next one lasts Next seconds. The
// store's clock, not sluice's, then picks the window of a decision among
// the window that ends at Start, the one of sluice's clock and the next,
// so a skew of up to a window between the two clocks still finds the
// window the store's clock is in. A window's state is named by its END
// (the three ends are Ends), which the store knows for each of the three
// windows where it would not know the first one's start.
type CalendarWindow struct {
	Limit int64 // per window
	Start int64 // µs since the epoch
	Len   int64 // s
	Next  int64 // s
}

// Ends returns the ends of the three windows cw names, µs since the epoch:
// Start (the previous window's), Start + Len, and that + Next.
func (cw CalendarWindow) Ends() [3]int64 {
	e1 := cw.Start + cw.Len*1_000_000
	return [3]int64{cw.Start, e1, e1 + cw.Next*1_000_000}
}

// Lens returns Len and Next as one script argument (CalendarLenBits).
func (cw CalendarWindow) Lens() int64 { return cw.Len<<CalendarLenBits | cw.Next }

// Until returns when, on sluice's clock, cw stops being the windows of
// that clock: the end of the window it is in.
func (cw CalendarWindow) Until() time.Time { return time.UnixMicro(cw.Ends()[1]) }

// CalendarAt returns p's calendar windows around now (sluice's clock), or
// the error that makes p unrepresentable.
func (p *Policy) CalendarAt(now time.Time) (CalendarWindow, error) {
	if p.Limit < 1 {
		return CalendarWindow{}, errors.New("limit must be at least 1")
	}
	if p.Limit > MaxScaled/4 {
		return CalendarWindow{}, fmt.Errorf("limit %d is too large to count exactly", p.Limit)
	}
	loc := p.Zone
	if loc == nil {
		loc = time.UTC
	}
	b, err := p.Calendar.around(now, loc)
	if err != nil {
		return CalendarWindow{}, err
	}
	cw := CalendarWindow{Limit: p.Limit, Start: b[0].UnixMicro()}
	for i, n := range []*int64{&cw.Len, &cw.Next} {
		d := b[i+1].Sub(b[i])
		if d%time.Second != 0 || d < time.Second || d >= (1<<CalendarLenBits)*time.Second {
			return CalendarWindow{}, fmt.Errorf("calendar %s in %s: a window of %s cannot be counted", p.Calendar, loc, d)
		}
		*n = int64(d / time.Second)
	}
	return cw, nil
}

// around returns the start of the window of unit c that now is in, in loc,
// its end and the next window's end. A window runs from the local midnight
// that starts its day, week (Monday), month or year to the next one; a
// midnight that a clock change skips or repeats is the instant time.Date
// gives it, and an empty window (a day a zone skipped) is no window.
func (c Calendar) around(now time.Time, loc *time.Location) ([3]time.Time, error) {
	y, m, d := now.In(loc).Date()
	var date time.Time // the civil date that names a window, in UTC
	switch c {
	case CalendarDay:
		date = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	case CalendarWeek:
		date = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		date = date.AddDate(0, 0, -(int(date.Weekday())+6)%7)
	case CalendarMonth:
		date = time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	case CalendarYear:
		date = time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
	default:
		return [3]time.Time{}, fmt.Errorf("unknown calendar %q, want day | week | month | year", c)
	}
	at := func(date time.Time) time.Time {
		return time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, loc)
	}
	// At most a few steps: only clock changes at midnight move a
	// window's start away from its date's.
	for i := 0; at(date).After(now); i++ {
		if i == 8 {
			return [3]time.Time{}, fmt.Errorf("calendar %s in %s: no window starts before %s", c, loc, now)
		}
		date = c.add(date, -1)
	}
	start, end := at(date), time.Time{}
	for i := 0; !end.After(now); i++ { // the first midnight after now ends the window
		if i == 8 {
			return [3]time.Time{}, fmt.Errorf("calendar %s in %s: no window ends after %s", c, loc, now)
		}
		date = c.add(date, 1)
		if end = at(date); !end.After(now) && end.After(start) {
			start = end // a later start that now is past
		}
	}
	next := end
	for i := 0; !next.After(end); i++ {
		if i == 8 {
			return [3]time.Time{}, fmt.Errorf("calendar %s in %s: no window ends after %s", c, loc, end)
		}
		date = c.add(date, 1)
		next = at(date)
	}
	return [3]time.Time{start, end, next}, nil
}

// add returns date moved by n units of c.
func (c Calendar) add(date time.Time, n int) time.Time {
	switch c {
	case CalendarWeek:
		return date.AddDate(0, 0, 7*n)
	case CalendarMonth:
		return date.AddDate(0, n, 0)
	case CalendarYear:
		return date.AddDate(n, 0, 0)
	}
	return date.AddDate(0, 0, n)
}
