package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// Calendar quotas (docs/configuration.md, "Calendar quotas"): calendar and
// timezone make a fixed_window policy's windows the zone's days, weeks,
// months or years. The checks here run beside check, with what the policy
// wrote itself (entry.lines): a calendar policy takes neither rate nor
// period, and inherits neither from defaults.

// checkCalendarUnit checks a calendar as written.
func checkCalendarUnit(c limit.Calendar) string {
	for _, known := range limit.Calendars {
		if c == known {
			return ""
		}
	}
	return fmt.Sprintf("must be one of day | week | month | year, got %q", c)
}

// loadZone reads a timezone as written: an IANA name (Europe/Berlin, UTC).
// "Local" is refused: two machines would count different days.
func loadZone(name string) (*time.Location, string) {
	if name == "" || name == "Local" || strings.HasPrefix(name, "/") {
		return nil, fmt.Sprintf("must be an IANA time zone name such as Europe/Berlin or UTC, got %q", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Sprintf("unknown time zone %q: want an IANA name such as Europe/Berlin or UTC", name)
	}
	return loc, ""
}

// calendarField decodes the calendar and timezone fields.
func calendarField(field, scope, s string) (string, func(*limit.Policy)) {
	if field == "calendar" {
		c := limit.Calendar(s)
		if scope == "defaults" {
			return "not allowed in defaults: a calendar policy takes no rate or period, so each one says so itself", nil
		}
		return checkCalendarUnit(c), func(p *limit.Policy) { p.Calendar = c }
	}
	loc, msg := loadZone(s)
	return msg, func(p *limit.Policy) { p.Zone = loc }
}

// inheritsFromDefaults reports whether a policy r takes field from the
// defaults d: a calendar policy takes neither rate nor period, nor does a
// concurrency policy (its period is a slot's TTL, which it writes itself,
// and a rate does not apply to it).
func inheritsFromDefaults(d, r *raw, field string) bool {
	if field != "rate" && field != "period" {
		return true
	}
	_, cal := r.apply["calendar"]
	return !(cal || r.bad["calendar"]) && !concurrencyOf(d, r)
}

// concurrencyOf reports whether the algorithm policy r has, written or
// from the defaults d, is concurrency.
func concurrencyOf(d, r *raw) bool {
	var p limit.Policy
	if set, ok := r.apply["algorithm"]; ok {
		set(&p)
	} else if d != nil && !r.bad["algorithm"] {
		if set, ok := d.apply["algorithm"]; ok {
			set(&p)
		}
	}
	return p.Algorithm.IsConcurrency()
}

// prepareCalendar fills in what check needs to know of a calendar policy
// before it runs: its algorithm, fixed_window when none is written.
func prepareCalendar(p *limit.Policy) {
	if p.Calendar != "" && p.Algorithm == "" {
		p.Algorithm = limit.FixedWindow
	}
}

// checkCalendar reports the problems of e's calendar fields.
func checkCalendar(e *entry, report func(field, msg string)) {
	p := e.p
	_, periodWritten := e.lines["period"]
	_, zoneWritten := e.lines["timezone"]
	switch {
	case e.skip["calendar"]:
	case p.Calendar == "":
		if zoneWritten && !e.skip["timezone"] {
			report("timezone", "needs calendar (day | week | month | year): a timezone places calendar windows")
		}
	default:
		if p.Algorithm != limit.FixedWindow && !e.skip["algorithm"] {
			report("algorithm", fmt.Sprintf("must be fixed_window with calendar (a calendar quota is a fixed window), got %s", p.Algorithm))
		}
		if p.Rate != 0 && !e.skip["rate"] {
			report("rate", fmt.Sprintf("not used with calendar: the quota is limit per calendar %s", p.Calendar))
		}
		if p.Period != 0 && !e.skip["period"] && (periodWritten || p.Period != p.Calendar.Nominal()) {
			report("period", fmt.Sprintf("not used with calendar: the window is the calendar %s of timezone", p.Calendar))
		}
	}
}

// normalizeCalendar writes a calendar policy's defaults: timezone UTC, and
// as its period the calendar's nominal length (limit.Calendar.Nominal),
// which decisions never use but the doors that show one period do.
func normalizeCalendar(p *limit.Policy) {
	if p.Calendar == "" {
		p.Zone = nil // a timezone from defaults places nothing
		return
	}
	if p.Zone == nil {
		p.Zone = time.UTC
	}
	p.Period = p.Calendar.Nominal()
}

// zoneName is the timezone of p as the config writes it; "" without a
// calendar.
func zoneName(p *limit.Policy) string {
	if p.Calendar == "" {
		return ""
	}
	if p.Zone == nil {
		return "UTC"
	}
	return p.Zone.String()
}
