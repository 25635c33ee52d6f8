package algotest

import (
	"time"
	_ "time/tzdata" // the zones below, on a machine without a zoneinfo

	"github.com/sluice-rl/sluice/limit"
)

// Calendar windows follow the zone's calendar, not the epoch: their steps
// are dated with at, and every expected time is counted here by hand from
// the zone's rules (the day daylight saving starts in New York has 23
// hours, the day it ends in Berlin 25).

func zone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

var (
	newYork = zone("America/New_York")
	berlin  = zone("Europe/Berlin")
	sydney  = zone("Australia/Sydney")
	kolkata = zone("Asia/Kolkata")
)

// at is the Step.At of a local time in loc, "2006-01-02 15:04:05.999999".
func at(loc *time.Location, wall string) int64 {
	t, err := time.ParseInLocation("2006-01-02 15:04:05.999999", wall, loc)
	if err != nil {
		panic(err)
	}
	return t.UnixMicro() - T0
}

func cal(limitN int64, unit limit.Calendar, loc *time.Location) *limit.Policy {
	return &limit.Policy{Name: "v", Algorithm: limit.FixedWindow, Limit: limitN, Calendar: unit, Zone: loc}
}

const (
	sec    = 1_000_000 // µs
	hourMs = 3_600_000
	dayMs  = 24 * hourMs
)

// Calendar is the table for calendar windows (fixed_window with calendar),
// sluice's clock the store's.
var Calendar = []Vector{
	{
		Name:   "New York: the day daylight saving starts has 23 hours",
		Policy: cal(3, limit.CalendarDay, newYork),
		Steps: []Step{
			{At: at(newYork, "2024-03-10 00:00:00"), Cost: 1, Want: Want{true, 2, -1, 23 * hourMs, 0}, TTL: 23*hourMs + 1000},
			// 12:00 EDT, 12 hours before midnight
			{At: at(newYork, "2024-03-10 12:00:00"), Cost: 2, Want: Want{true, 0, -1, 12 * hourMs, 0}},
			{At: at(newYork, "2024-03-10 12:00:00"), Cost: 1, Want: Want{false, 0, 12 * hourMs, 12 * hourMs, 0}},
			{At: at(newYork, "2024-03-10 23:59:59.999"), Cost: 1, Want: Want{false, 0, 1, 1, 0}},
			{At: at(newYork, "2024-03-11 00:00:00"), Cost: 1, Want: Want{true, 2, -1, dayMs, 0}, TTL: dayMs + 1000},
		},
	},
	{
		Name:   "Berlin: the day daylight saving ends has 25 hours",
		Policy: cal(2, limit.CalendarDay, berlin),
		Steps: []Step{
			{At: at(berlin, "2024-10-27 00:00:00"), Cost: 1, Want: Want{true, 1, -1, 25 * hourMs, 0}, TTL: 25*hourMs + 1000},
			{At: at(berlin, "2024-10-27 23:59:59.999999"), Cost: 1, Want: Want{true, 0, -1, 1, 0}, TTL: 1001},
			{At: at(berlin, "2024-10-27 23:59:59.999999"), Cost: 1, Want: Want{false, 0, 1, 1, 0}},
			{At: at(berlin, "2024-10-28 00:00:00"), Cost: 2, Want: Want{true, 0, -1, dayMs, 0}},
		},
	},
	{
		Name:   "Sydney: 25 hours the day daylight saving ends, 23 the day it starts",
		Policy: cal(1, limit.CalendarDay, sydney),
		Steps: []Step{
			{At: at(sydney, "2024-04-07 00:00:00"), Cost: 1, Want: Want{true, 0, -1, 25 * hourMs, 0}},
			// 12:00 AEST, after the clocks went back at 03:00
			{At: at(sydney, "2024-04-07 12:00:00"), Cost: 1, Want: Want{false, 0, 12 * hourMs, 12 * hourMs, 0}},
			{At: at(sydney, "2024-10-06 00:00:00"), Cost: 1, Want: Want{true, 0, -1, 23 * hourMs, 0}},
		},
	},
	{
		Name:   "a month of 28 days, then one of 31",
		Policy: cal(5, limit.CalendarMonth, time.UTC),
		Steps: []Step{
			{At: at(time.UTC, "2023-02-01 00:00:00"), Cost: 1, Want: Want{true, 4, -1, 28 * dayMs, 0}, TTL: 28*dayMs + 1000},
			{At: at(time.UTC, "2023-02-28 23:59:59"), Cost: 4, Want: Want{true, 0, -1, 1000, 0}},
			{At: at(time.UTC, "2023-02-28 23:59:59"), Cost: 1, Want: Want{false, 0, 1000, 1000, 0}},
			{At: at(time.UTC, "2023-03-01 00:00:00"), Cost: 1, Want: Want{true, 4, -1, 31 * dayMs, 0}},
		},
	},
	{
		Name:   "Sydney: February of a leap year has 29 days",
		Policy: cal(5, limit.CalendarMonth, sydney),
		Steps: []Step{
			{At: at(sydney, "2024-02-01 00:00:00"), Cost: 1, Want: Want{true, 4, -1, 29 * dayMs, 0}},
			{At: at(sydney, "2024-02-29 12:00:00"), Cost: 1, Want: Want{true, 3, -1, 12 * hourMs, 0}},
			// March ends before daylight saving does (7 April): 31 days
			{At: at(sydney, "2024-03-01 00:00:00"), Cost: 1, Want: Want{true, 4, -1, 31 * dayMs, 0}},
		},
	},
	{
		Name:   "Kolkata: a month of 30 days",
		Policy: cal(2, limit.CalendarMonth, kolkata),
		Steps: []Step{
			{At: at(kolkata, "2024-04-01 00:00:00"), Cost: 1, Want: Want{true, 1, -1, 30 * dayMs, 0}, TTL: 30*dayMs + 1000},
			{At: at(kolkata, "2024-04-30 23:59:59.999"), Cost: 2, Want: Want{false, 1, 1, 1, 0}},
			{At: at(kolkata, "2024-05-01 00:00:00"), Cost: 2, Want: Want{true, 0, -1, 31 * dayMs, 0}},
		},
	},
	{
		Name:   "New York: March has 31 days less the hour daylight saving takes",
		Policy: cal(1, limit.CalendarMonth, newYork),
		Steps: []Step{
			{At: at(newYork, "2024-03-01 00:00:00"), Cost: 1, Want: Want{true, 0, -1, 31*dayMs - hourMs, 0}},
		},
	},
	{
		Name:   "Kolkata: the year ends at its midnight",
		Policy: cal(2, limit.CalendarYear, kolkata),
		Steps: []Step{
			{At: at(kolkata, "2024-12-31 23:00:00"), Cost: 2, Want: Want{true, 0, -1, hourMs, 0}, TTL: hourMs + 1000},
			{At: at(kolkata, "2024-12-31 23:00:00"), Cost: 1, Want: Want{false, 0, hourMs, hourMs, 0}},
			{At: at(kolkata, "2025-01-01 00:00:00"), Cost: 1, Want: Want{true, 1, -1, 365 * dayMs, 0}},
		},
	},
	{
		Name:   "a leap year has 366 days",
		Policy: cal(1, limit.CalendarYear, time.UTC),
		Steps: []Step{
			{At: at(time.UTC, "2024-01-01 00:00:00"), Cost: 1, Want: Want{true, 0, -1, 366 * dayMs, 0}},
		},
	},
	{
		Name:   "New York: a leap year has 366 days (its two clock changes cancel)",
		Policy: cal(1, limit.CalendarYear, newYork),
		Steps: []Step{
			{At: at(newYork, "2024-01-01 00:00:00"), Cost: 1, Want: Want{true, 0, -1, 366 * dayMs, 0}},
		},
	},
	{
		Name:   "weeks start on Monday",
		Policy: cal(3, limit.CalendarWeek, time.UTC),
		Steps: []Step{
			// Wednesday noon: 4.5 days to Monday 8 January
			{At: at(time.UTC, "2024-01-03 12:00:00"), Cost: 1, Want: Want{true, 2, -1, 4*dayMs + 12*hourMs, 0}},
			{At: at(time.UTC, "2024-01-07 23:00:00"), Cost: 2, Want: Want{true, 0, -1, hourMs, 0}},
			{At: at(time.UTC, "2024-01-07 23:00:00"), Cost: 1, Want: Want{false, 0, hourMs, hourMs, 0}},
			{At: at(time.UTC, "2024-01-08 00:00:00"), Cost: 3, Want: Want{true, 0, -1, 7 * dayMs, 0}},
		},
	},
	{
		Name:   "Berlin: the week daylight saving ends has 7 days and an hour",
		Policy: cal(3, limit.CalendarWeek, berlin),
		Steps: []Step{
			{At: at(berlin, "2024-10-21 00:00:00"), Cost: 1, Want: Want{true, 2, -1, 7*dayMs + hourMs, 0}},
		},
	},
	{
		Name:   "peek spends nothing, cost above the quota never fits, a lowered quota clamps",
		Policy: cal(5, limit.CalendarDay, time.UTC),
		Steps: []Step{
			{At: at(time.UTC, "2024-05-01 18:00:00"), Peek: true, Cost: 1, Want: Want{true, 5, -1, 0, 0}, TTL: NoKey},
			{At: at(time.UTC, "2024-05-01 18:00:00"), Cost: 6, Want: Want{false, 5, -1, 0, 0}, TTL: NoKey},
			{At: at(time.UTC, "2024-05-01 18:00:00"), Cost: 4, Want: Want{true, 1, -1, 6 * hourMs, 0}},
			{Policy: cal(2, limit.CalendarDay, time.UTC), At: at(time.UTC, "2024-05-01 18:00:00"), Cost: 1, Want: Want{false, 0, 6 * hourMs, 6 * hourMs, 0}},
		},
	},
	{
		Name:   "a 1-day fixed_window's state is not the calendar day's: it reads as spent",
		Policy: fw(3, 24*time.Hour), // epoch-aligned: the UTC day
		Steps: []Step{
			{At: at(time.UTC, "2024-05-01 10:00:00"), Cost: 1, Want: Want{true, 2, -1, 14 * hourMs, 0}},
			{Policy: cal(3, limit.CalendarDay, time.UTC), At: at(time.UTC, "2024-05-01 11:00:00"), Cost: 1, Want: Want{false, 0, 13 * hourMs, 13 * hourMs, 0}},
		},
	},
	{
		Name:   "a calendar day's state is not a 1-day fixed_window's: it reads as spent",
		Policy: cal(3, limit.CalendarDay, time.UTC),
		Steps: []Step{
			{At: at(time.UTC, "2024-05-01 10:00:00"), Cost: 1, Want: Want{true, 2, -1, 14 * hourMs, 0}},
			{Policy: fw(3, 24*time.Hour), At: at(time.UTC, "2024-05-01 11:00:00"), Cost: 1, Want: Want{false, 0, 13 * hourMs, 13 * hourMs, 0}},
		},
	},
	{
		Name:   "from a day to a month, the day's count moves into the month",
		Policy: cal(3, limit.CalendarDay, time.UTC),
		Steps: []Step{
			{At: at(time.UTC, "2024-05-01 10:00:00"), Cost: 2, Want: Want{true, 1, -1, 14 * hourMs, 0}},
			// 11:00 on 1 May to 1 June: 30 days and 13 hours
			{Policy: cal(10, limit.CalendarMonth, time.UTC), At: at(time.UTC, "2024-05-01 11:00:00"), Cost: 1, Want: Want{true, 7, -1, 30*dayMs + 13*hourMs, 0}, TTL: 30*dayMs + 13*hourMs + 1000},
			// and back: the month's 3 fill the day
			{Policy: cal(3, limit.CalendarDay, time.UTC), At: at(time.UTC, "2024-05-01 12:00:00"), Cost: 1, Want: Want{false, 0, 12 * hourMs, 12 * hourMs, 0}},
		},
	},
	{
		Name:   "from UTC to Kolkata, the count moves into Kolkata's day",
		Policy: cal(3, limit.CalendarDay, time.UTC),
		Steps: []Step{
			{At: at(time.UTC, "2024-05-01 10:00:00"), Cost: 1, Want: Want{true, 2, -1, 14 * hourMs, 0}},
			// 16:30 in Kolkata, 7.5 hours before its midnight
			{Policy: cal(3, limit.CalendarDay, kolkata), At: at(time.UTC, "2024-05-01 11:00:00"), Cost: 1, Want: Want{true, 1, -1, 7*hourMs + 30*60_000, 0}},
		},
	},
}

// CalendarSkew is the table for calendar windows with sluice's clock apart
// from the store's (Step.Sluice): the store's clock picks the window.
// Only runners that take both clocks run it (RunAt).
var CalendarSkew = []Vector{
	{
		Name:   "around midnight the store's clock picks the day, whichever side sluice's is on",
		Policy: cal(2, limit.CalendarDay, berlin),
		Steps: []Step{
			{At: at(berlin, "2024-06-01 23:59:59"), Sluice: 2 * sec, Cost: 1, Want: Want{true, 1, -1, 1000, 0}, TTL: 2000},
			{At: at(berlin, "2024-06-01 23:59:59.5"), Cost: 1, Want: Want{true, 0, -1, 500, 0}},
			{At: at(berlin, "2024-06-01 23:59:59.5"), Sluice: 2 * sec, Cost: 1, Want: Want{false, 0, 500, 500, 0}},
			{At: at(berlin, "2024-06-02 00:00:00.5"), Sluice: -sec, Cost: 1, Want: Want{true, 1, -1, dayMs - 500, 0}, TTL: dayMs + 500},
			{At: at(berlin, "2024-06-02 00:00:00.5"), Cost: 1, Want: Want{true, 0, -1, dayMs - 500, 0}},
		},
	},
	{
		Name:   "at midnight exactly the store's clock is in the new day, sluice's a second before it",
		Policy: cal(1, limit.CalendarDay, newYork),
		Steps: []Step{
			{At: at(newYork, "2024-11-03 23:59:59.999999"), Cost: 1, Want: Want{true, 0, -1, 1, 0}},
			// 3 November has 25 hours, 4 November 24
			{At: at(newYork, "2024-11-04 00:00:00"), Sluice: -sec, Cost: 1, Want: Want{true, 0, -1, dayMs, 0}},
			{At: at(newYork, "2024-11-04 00:00:00"), Sluice: -25 * 3600 * sec, Cost: 1, Want: Want{false, 0, dayMs, dayMs, 0}},
		},
	},
	{
		Name:   "a store clock a day behind sluice's is in the day before",
		Policy: cal(2, limit.CalendarDay, time.UTC),
		Steps: []Step{
			{At: at(time.UTC, "2024-06-01 12:00:00"), Sluice: 24 * 3600 * sec, Cost: 1, Want: Want{true, 1, -1, 12 * hourMs, 0}},
			{At: at(time.UTC, "2024-06-01 12:00:00"), Cost: 1, Want: Want{true, 0, -1, 12 * hourMs, 0}},
		},
	},
	{
		Name:   "a store clock more than a window ahead of sluice's finds no window and refuses",
		Policy: cal(2, limit.CalendarDay, time.UTC),
		Steps: []Step{
			{At: at(time.UTC, "2024-06-03 00:00:00"), Sluice: -48 * 3600 * sec, Cost: 1, Want: Want{false, 0, 1, 1, 0}, TTL: NoKey},
			{At: at(time.UTC, "2024-06-03 00:00:00"), Cost: 1, Want: Want{true, 1, -1, dayMs, 0}},
		},
	},
	{
		Name:   "a store clock that goes back keeps the key in its stored window",
		Policy: cal(2, limit.CalendarDay, time.UTC),
		Steps: []Step{
			{At: at(time.UTC, "2024-06-02 00:00:00.5"), Cost: 1, Want: Want{true, 1, -1, dayMs - 500, 0}},
			{At: at(time.UTC, "2024-06-01 23:59:59.5"), Cost: 1, Want: Want{true, 0, -1, dayMs + 500, 0}},
		},
	},
}
