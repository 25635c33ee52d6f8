package cluster

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// A calendar policy's script arguments name the windows around sluice's
// clock: cached within a window, computed again from its end on, while
// every other policy's are cached for good.
func TestCalendarArgsRenewAtTheBoundary(t *testing.T) {
	var s Store
	p := &limit.Policy{Algorithm: limit.FixedWindow, Limit: 5, Calendar: limit.CalendarDay, Zone: time.UTC}
	noon := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	midnight := time.Date(2024, 3, 2, 0, 0, 0, 0, time.UTC)
	a, err := s.policyArgsAt(p, noon)
	if err != nil {
		t.Fatal(err)
	}
	if a.rate != time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC).UnixMicro() || !a.until.Equal(midnight) {
		t.Fatalf("at noon: start %v until %v", a.rate, a.until)
	}
	if b, _ := s.policyArgsAt(p, midnight.Add(-time.Microsecond)); b != a {
		t.Fatal("computed again within the window")
	}
	b, err := s.policyArgsAt(p, midnight)
	if err != nil {
		t.Fatal(err)
	}
	if b == a || b.rate != midnight.UnixMicro() {
		t.Fatalf("at midnight: start %v, want %d", b.rate, midnight.UnixMicro())
	}
	if c, _ := s.policyArgsAt(p, midnight.Add(time.Hour)); c != b {
		t.Fatal("the renewed arguments are not cached")
	}
	q := &limit.Policy{Algorithm: limit.FixedWindow, Limit: 5, Period: 24 * time.Hour}
	x, _ := s.policyArgsAt(q, noon)
	if y, _ := s.policyArgsAt(q, noon.AddDate(1, 0, 0)); x != y || !x.until.IsZero() {
		t.Fatal("a fixed_window's arguments are not cached for good")
	}
}
