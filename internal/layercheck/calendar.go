package layercheck

import "time"

// windowKind names the windows of a window variant: variants of one kind
// count in the same windows.
type windowKind struct {
	period   time.Duration // of epoch-aligned windows; 0 for a calendar
	calendar string
	zone     string
}

func (v Variant) kind() windowKind {
	if v.Calendar == "" {
		return windowKind{period: v.Period}
	}
	return windowKind{calendar: v.Calendar, zone: v.zone().String()}
}

func (v Variant) zone() *time.Location {
	if v.Zone == nil {
		return time.UTC
	}
	return v.Zone
}

// windowAt returns the window of v that holds t: Period long from the
// epoch, or the calendar day, week (from Monday), month or year of Zone
// that holds it, counted here with the time package alone.
func (v Variant) windowAt(t time.Time) (start, end time.Time) {
	if v.Calendar == "" {
		p := int64(v.Period)
		start = time.Unix(0, t.UnixNano()/p*p)
		return start, start.Add(v.Period)
	}
	loc := v.zone()
	y, m, d := t.In(loc).Date()
	switch v.Calendar {
	case "week":
		d -= (int(t.In(loc).Weekday()) + 6) % 7
		return time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+7, 0, 0, 0, 0, loc)
	case "month":
		return time.Date(y, m, 1, 0, 0, 0, 0, loc), time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	case "year":
		return time.Date(y, 1, 1, 0, 0, 0, 0, loc), time.Date(y+1, 1, 1, 0, 0, 0, 0, loc)
	}
	return time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
}
