package policy

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

const calendarYAML = `defaults:
  on_store_error: closed
  rate: 10
  period: 1m
  timezone: Europe/Berlin
policies:
  - name: daily
    match: "daily:*"
    calendar: day
    timezone: America/New_York
    limit: 1000
  - name: monthly
    match: "monthly:*"
    algorithm: fixed_window
    calendar: month
    limit: 50000
  - name: api
    match: "*"
    limit: 5
`

func TestParseCalendar(t *testing.T) {
	s, err := Parse([]byte(calendarYAML), "sluice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ny, _ := time.LoadLocation("America/New_York")
	berlin, _ := time.LoadLocation("Europe/Berlin")
	want := []limit.Policy{
		{Name: "daily", Match: "daily:*", Algorithm: limit.FixedWindow, Limit: 1000, Period: 24 * time.Hour, OnStoreError: limit.FailClosed,
			LocalShare: 1, Hot: limit.Hot{Mode: limit.HotOff, Default: true}, Calendar: limit.CalendarDay, Zone: ny},
		// the defaults' rate and period are not a calendar policy's; their timezone is
		{Name: "monthly", Match: "monthly:*", Algorithm: limit.FixedWindow, Limit: 50000, Period: 30 * 24 * time.Hour, OnStoreError: limit.FailClosed,
			LocalShare: 1, Hot: limit.Hot{Mode: limit.HotOff, Default: true}, Calendar: limit.CalendarMonth, Zone: berlin},
		// a timezone from defaults places nothing without a calendar
		{Name: "api", Match: "*", Algorithm: limit.TokenBucket, Limit: 5, Rate: 10, Period: time.Minute, OnStoreError: limit.FailClosed,
			LocalShare: 1, Hot: limit.Hot{Mode: limit.HotOff, Default: true}},
	}
	got := derefAll(s.Policies)
	for i := range got { // locations compare by name
		if got[i].Zone != nil && want[i].Zone != nil && got[i].Zone.String() == want[i].Zone.String() {
			got[i].Zone = want[i].Zone
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("policies:\n got %+v\nwant %+v", got, want)
	}
	if d := Describe(s.Policies[0]); !strings.Contains(d, "fixed_window limit=1000/calendar day timezone=America/New_York") {
		t.Fatalf("Describe = %s", d)
	}
}

func TestParseCalendarErrors(t *testing.T) {
	const head = "defaults: {on_store_error: open}\npolicies:\n  - name: q\n    match: \"q:*\"\n    limit: 5\n"
	tests := []struct{ name, yaml, want string }{
		{"period given", head + "    calendar: day\n    period: 1d\n", `sluice.yaml:7: policy #1 "q": period: not used with calendar: the window is the calendar day of timezone`},
		{"rate given", head + "    calendar: week\n    rate: 5\n", `sluice.yaml:7: policy #1 "q": rate: not used with calendar: the quota is limit per calendar week`},
		{"another algorithm", head + "    calendar: day\n    algorithm: sliding_window\n", `sluice.yaml:7: policy #1 "q": algorithm: must be fixed_window with calendar (a calendar quota is a fixed window), got sliding_window`},
		{"unknown calendar", head + "    calendar: fortnight\n", `sluice.yaml:6: policy #1 "q": calendar: must be one of day | week | month | year, got "fortnight"`},
		{"unknown zone", head + "    calendar: day\n    timezone: Mars/Olympus_Mons\n", `sluice.yaml:7: policy #1 "q": timezone: unknown time zone "Mars/Olympus_Mons": want an IANA name such as Europe/Berlin or UTC`},
		{"local zone", head + "    calendar: day\n    timezone: Local\n", `sluice.yaml:7: policy #1 "q": timezone: must be an IANA time zone name such as Europe/Berlin or UTC, got "Local"`},
		{"zone without calendar", head + "    rate: 1\n    timezone: UTC\n", `sluice.yaml:7: policy #1 "q": timezone: needs calendar (day | week | month | year): a timezone places calendar windows`},
		{"calendar in defaults", "defaults: {on_store_error: open, calendar: day}\npolicies:\n  - {name: q, match: q, limit: 1}\n", `sluice.yaml:1: defaults: calendar: not allowed in defaults`},
		{"hot lease", head + "    calendar: day\n    hot: {mode: lease, threshold: 5}\n", `hot.mode: lease needs a bucket algorithm (token_bucket or gcra), not fixed_window`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "sluice.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// RL.POLICY SET takes the calendar fields, GET shows them, and what GET
// shows reads back as the same policy, also through a whole Set.
func TestCalendarPolicyJSON(t *testing.T) {
	p, err := ParsePolicyJSON("quota", []byte(`{"match": "quota:*", "limit": 100, "calendar": "week", "timezone": "Asia/Kolkata", "on_store_error": "closed"}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Calendar != limit.CalendarWeek || p.Zone.String() != "Asia/Kolkata" || p.Algorithm != limit.FixedWindow {
		t.Fatalf("parsed %+v", p)
	}
	js := PolicyJSON(p)
	for _, want := range []string{`"calendar":"week"`, `"timezone":"Asia/Kolkata"`, `"algorithm":"fixed_window"`} {
		if !strings.Contains(js, want) {
			t.Fatalf("PolicyJSON = %s, want %s", js, want)
		}
	}
	if strings.Contains(js, `"period"`) || strings.Contains(js, `"rate"`) {
		t.Fatalf("PolicyJSON = %s: a calendar policy has no period or rate to show", js)
	}
	q, err := ParsePolicyJSON("quota", []byte(policyJSON(p, true))) // the stored form: GET's names the hot mode in force
	if err != nil || !reflect.DeepEqual(q, p) {
		t.Fatalf("round trip %+v, %v; want %+v", q, err, p)
	}
	if _, err := NewSet(0, p); err != nil {
		t.Fatalf("a parsed calendar policy in NewSet: %v", err)
	}
	for _, bad := range []string{
		`{"match": "q", "limit": 1, "calendar": "day", "period": "1d", "on_store_error": "open"}`,
		`{"match": "q", "limit": 1, "calendar": "day", "timezone": "Nowhere/Else", "on_store_error": "open"}`,
	} {
		if _, err := ParsePolicyJSON("q", []byte(bad)); err == nil {
			t.Fatalf("%s: accepted", bad)
		}
	}
}
