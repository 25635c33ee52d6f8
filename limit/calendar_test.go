package limit

import (
	"math/rand/v2"
	"testing"
	"time"
	_ "time/tzdata"
)

// Around random instants of 2005 to 2035, in zones whose clocks change at
// midnight (Havana, Santiago), by half an hour (Lord Howe), or that skipped
// a whole day (Apia, 30 December 2011): the window holds the instant, the
// next follows it, both are whole seconds, and each boundary is a local
// midnight of its unit (the first of a month, a Monday) unless a clock
// change moved that midnight.
func TestCalendarAround(t *testing.T) {
	zones := []string{"UTC", "America/New_York", "Europe/Berlin", "Australia/Sydney", "Asia/Kolkata",
		"America/Havana", "America/Santiago", "Australia/Lord_Howe", "Pacific/Apia", "Asia/Kathmandu"}
	rng := rand.New(rand.NewPCG(5, 6))
	from := time.Date(2005, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	to := time.Date(2035, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	instants := []time.Time{time.Date(2011, 12, 29, 12, 0, 0, 0, time.UTC), time.Date(2011, 12, 30, 12, 0, 0, 0, time.UTC)}
	for range 3000 {
		instants = append(instants, time.Unix(from+rng.Int64N(to-from), rng.Int64N(1e9)))
	}
	for _, name := range zones {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, unit := range Calendars {
			for _, now := range instants {
				p := &Policy{Algorithm: FixedWindow, Limit: 1, Calendar: unit, Zone: loc}
				cw, err := p.CalendarAt(now)
				if err != nil {
					t.Fatalf("%s %s at %s: %v", name, unit, now, err)
				}
				e := cw.Ends()
				if n := now.UnixMicro(); n < e[0] || n >= e[1] || e[2] <= e[1] {
					t.Fatalf("%s %s at %s: windows %v do not hold it", name, unit, now, e)
				}
				for _, b := range e {
					lt := time.UnixMicro(b).In(loc)
					onBoundary := lt.Hour() == 0 && lt.Minute() == 0 && lt.Second() == 0 &&
						(unit != CalendarWeek || lt.Weekday() == time.Monday) &&
						(unit != CalendarMonth && unit != CalendarYear || lt.Day() == 1) &&
						(unit != CalendarYear || lt.Month() == time.January)
					if _, off := lt.Zone(); !onBoundary && !changedNear(loc, lt) {
						t.Fatalf("%s %s at %s: boundary %s (offset %d) is no local midnight of its unit", name, unit, now, lt, off)
					}
				}
			}
		}
	}
}

// changedNear reports whether loc's offset changes within a day of t.
func changedNear(loc *time.Location, t time.Time) bool {
	_, a := t.Add(-24 * time.Hour).In(loc).Zone()
	_, b := t.Add(24 * time.Hour).In(loc).Zone()
	return a != b
}

// The two lengths share one script argument and come back out of it.
func TestCalendarLens(t *testing.T) {
	p := &Policy{Algorithm: FixedWindow, Limit: 3, Calendar: CalendarYear, Zone: time.UTC}
	cw, err := p.CalendarAt(time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if cw.Len != 366*86400 || cw.Next != 365*86400 {
		t.Fatalf("year lengths %d, %d s", cw.Len, cw.Next)
	}
	if l := cw.Lens(); l>>CalendarLenBits != cw.Len || l&(1<<CalendarLenBits-1) != cw.Next || l >= 1<<53 {
		t.Fatalf("Lens %d does not hold %d and %d", l, cw.Len, cw.Next)
	}
	if _, err := (&Policy{Limit: 1, Calendar: "fortnight"}).CalendarAt(time.Now()); err == nil {
		t.Fatal("an unknown calendar has windows")
	}
}
