package ratelimitheader

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// nw is NoWindow, short for the tables.
const nw = NoWindow

// The examples of draft-ietf-httpapi-ratelimit-headers-11 (23 May 2026),
// each field value as the draft prints it, with its section, read by
// ParsePolicies / ParseLimits.
func TestDraftExamplesParse(t *testing.T) {
	t.Parallel()
	b := func(s string) []byte { return []byte(s) }
	policies := []struct {
		section string
		field   string // the value after "RateLimit-Policy: "
		want    []QuotaPolicy
	}{
		{"3", `"burst";q=100;w=60,"daily";q=1000;w=86400`,
			[]QuotaPolicy{{Name: "burst", Quota: 100, Window: 60}, {Name: "daily", Quota: 1000, Window: 86400}}},
		{"3.2", `"default";q=100;w=10`, []QuotaPolicy{{Name: "default", Quota: 100, Window: 10}}},
		{"3.2", `"permin";q=50;w=60,"perhr";q=1000;w=3600`,
			[]QuotaPolicy{{Name: "permin", Quota: 50, Window: 60}, {Name: "perhr", Quota: 1000, Window: 3600}}},
		// pk=:cHsdsRa894==: has non-zero pad bits, which a parser should
		// accept (RFC 9651, section 4.2.7): 7 bytes.
		{"3.2", `"peruser";q=100;w=60;pk=:cHsdsRa894==:`,
			[]QuotaPolicy{{Name: "peruser", Quota: 100, Window: 60, PartitionKey: b("p{\x1d\xb1\x16\xbc\xf7")}}},
		{"3.2", `"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`,
			[]QuotaPolicy{{Name: "peruser", Quota: 65535, Unit: "content-bytes", Window: 10, PartitionKey: b("\xb1\xd7\xe3,\x95\x0eP")}}},
		{"8.5", `"somepolicy";q=10000;w=1000`, []QuotaPolicy{{Name: "somepolicy", Quota: 10000, Window: 1000}}},
		{"B.1.3", `"basic";q=100;w=60`, []QuotaPolicy{{Name: "basic", Quota: 100, Window: 60}}},
		{"B.2.1", `"fixedwindow";q=100;w=60`, []QuotaPolicy{{Name: "fixedwindow", Quota: 100, Window: 60}}},
		{"B.2.2", `"dynamic";q=100;w=60`, []QuotaPolicy{{Name: "dynamic", Quota: 100, Window: 60}}},
		{"B.2.3", `"dynamic";q=15;w=20`, []QuotaPolicy{{Name: "dynamic", Quota: 15, Window: 20}}},
		{"B.3.1", `"hour";q=1000;w=3600, "day";q=5000;w=86400`,
			[]QuotaPolicy{{Name: "hour", Quota: 1000, Window: 3600}, {Name: "day", Quota: 5000, Window: 86400}}},
		// FAQ 8: burst is a parameter of the server's own, a comment.
		{"FAQ 8", `"sliding";q=100;w=60;burst=1000`, []QuotaPolicy{{Name: "sliding", Quota: 100, Window: 60}}},
		{"FAQ 8", `"fixed";q=5000;w=3600;burst=0`, []QuotaPolicy{{Name: "fixed", Quota: 5000, Window: 3600}}},
	}
	for _, c := range policies {
		got, err := ParsePolicies(c.field)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("section %s, RateLimit-Policy: %s\n got %+v, %v\nwant %+v", c.section, c.field, got, err, c.want)
		}
	}

	limits := []struct {
		section string
		field   string // the value after "RateLimit: "
		want    ServiceLimit
	}{
		{"4", `"default";r=50;t=30`, ServiceLimit{"default", 50, 30, nil}},
		{"4.2", `"default";r=999;pk=:dHJpYWwxMjEzMjM=:`, ServiceLimit{"default", 999, nw, b("trial121323")}},
		{"4.2", `"default";r=300000000;t=60;pk=:QXBwLTk5OQ==:`, ServiceLimit{"default", 300000000, 60, b("App-999")}},
		{"6", `"problemPolicy";r=0;t=10`, ServiceLimit{"problemPolicy", 0, 10, nil}},
		{"7", `"default";r=1;t=7`, ServiceLimit{"default", 1, 7, nil}},
		{"8.5", `"daily";r=1;t=86400`, ServiceLimit{"daily", 1, 86400, nil}},
		{"8.5", `"somepolicy";r=10000;t=10`, ServiceLimit{"somepolicy", 10000, 10, nil}},
		{"B.1.1", `"default";r=0;t=50`, ServiceLimit{"default", 0, 50, nil}},
		{"B.1.1", `"default";r=0;t=48`, ServiceLimit{"default", 0, 48, nil}},
		{"B.1.2", `"dayLimit";r=100;t=36000`, ServiceLimit{"dayLimit", 100, 36000, nil}},
		{"B.1.3", `"basic";r=60;t=58`, ServiceLimit{"basic", 60, 58, nil}},
		{"B.1.3", `"basic";r=20;t=56`, ServiceLimit{"basic", 20, 56, nil}},
		{"B.1.4", `"default";r=0;t=5`, ServiceLimit{"default", 0, 5, nil}},
		{"B.2.1", `"fixedwindow";r=99;t=50`, ServiceLimit{"fixedwindow", 99, 50, nil}},
		{"B.2.2", `"dynamic";r=9;t=50`, ServiceLimit{"dynamic", 9, 50, nil}},
		{"B.2.3", `"dynamic";r=0;t=20`, ServiceLimit{"dynamic", 0, 20, nil}},
		{"B.3", `"dynamic";r=15;t=40`, ServiceLimit{"dynamic", 15, 40, nil}},
		{"B.3.1", `"day";r=100;t=36000`, ServiceLimit{"day", 100, 36000, nil}},
		// FAQ 8 prints "RateLimit:" with no space before the value.
		{"FAQ 8", `"default";r=50;t=60`, ServiceLimit{"default", 50, 60, nil}},
		{"FAQ 8", `"sliding";r=50;t=44`, ServiceLimit{"sliding", 50, 44, nil}},
		// "RateLimit header fields currently used on the web": q on a
		// RateLimit item is a comment there.
		{"fields on the web", `"sliding";q=12;r=6;t=1`, ServiceLimit{"sliding", 6, 1, nil}},
	}
	for _, c := range limits {
		got, err := ParseLimits(c.field)
		if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], c.want) {
			t.Errorf("section %s, RateLimit: %s\n got %+v, %v\nwant %+v", c.section, c.field, got, err, c.want)
		}
	}
}

// A field split over several lines is one list (draft sections 3 and 4,
// RFC 9651 section 4.2), as http.Header.Values returns them.
func TestSplitFieldLines(t *testing.T) {
	t.Parallel()
	got, err := ParsePolicies(`"permin";q=50;w=60`, `"perhr";q=1000;w=3600`)
	if err != nil || len(got) != 2 || got[1].Name != "perhr" || got[1].Window != 3600 {
		t.Errorf("two lines: %+v, %v", got, err)
	}
}

// What -11 no longer allows, and fields a client must ignore as malformed
// (section 7): each is an error naming what is wrong.
func TestMalformedFields(t *testing.T) {
	t.Parallel()
	cases := []struct {
		field  string
		policy bool // RateLimit-Policy, else RateLimit
		want   string
	}{
		// draft -10, appendix B.3.1 ("Missing Remaining information"),
		// dropped from -11: the identifier is a Token and RateLimit has no r.
		{`quota;q=100;w=1`, true, "is a Token; it must be a String"},
		{`quota;t=1`, false, "is a Token; it must be a String"},
		{`"quota";t=1`, false, "no r"},
		{`"default";w=10`, true, "no q"},
		{`"default";q=-1`, true, "q=-1, want at least 0"},
		{`"default";q=100;w=0`, true, "w=0, want at least 1"},
		{`"default";q=1.5`, true, "q is a Decimal, want an Integer"},
		{`"default";q=100;qu=requests`, true, "qu is a Token, want a String"},
		{`"default";q=100;pk="user"`, true, "pk is a String, want a Byte Sequence"},
		{`"default";r=1;t=-3`, false, "t=-3, want at least 0"},
		{`"default";r=1;t="5"`, false, "t is a String, want an Integer"},
		{``, false, "an empty list"},
		{`   `, true, "an empty list"},
		{`("a" "b");q=1`, true, "an inner list"},
		{`"a";q=1,`, true, "a trailing ','"},
		{`"a";q=1 "b";q=2`, true, `'"' after an item, want ','`},
		{`"a;q=1`, true, "without its closing"},
		{`"a\x";q=1`, true, `escapes only`},
		{`"a";Q=1`, true, "must start with a-z"},
		{`"a";q=1234567890123456`, true, "at most 15 digits"},
		{`"a";q=1;pk=:not base64:`, true, "in a Byte Sequence"},
		{`"a";q=1;pk=:abcde:`, true, "a Byte Sequence: illegal base64"},
		{`"é";q=1`, true, "in a String"},
		{`12;q=1`, true, "the policy is an Integer"},
		{`"a";q=`, true, "the field ends where a value is required"},
		{`"a";q=?2`, true, "a Boolean is ?0 or ?1"},
	}
	for _, c := range cases {
		var err error
		if c.policy {
			_, err = ParsePolicies(c.field)
		} else {
			_, err = ParseLimits(c.field)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.field, err, c.want)
		}
	}
}

// The other structured-field types, as parameter values: ParseList reads
// them all, so a comment parameter of any type does not make a field
// malformed.
func TestParseListTypes(t *testing.T) {
	t.Parallel()
	items, err := ParseList(`tok;a=-12;b=4.125;c="x\"y";d=:AQID:;e=?0;f;g=@1659578233;h=%"f%c3%bc";i=a/b:c`)
	if err != nil || len(items) != 1 {
		t.Fatalf("%+v, %v", items, err)
	}
	want := Item{Value: Token("tok"), Params: []Param{{"a", int64(-12)}, {"b", 4.125}, {"c", `x"y`}, {"d", []byte{1, 2, 3}},
		{"e", false}, {"f", true}, {"g", Date(1659578233)}, {"h", DisplayString("fü")}, {"i", Token("a/b:c")}}}
	if !reflect.DeepEqual(items[0], want) {
		t.Errorf("got  %#v\nwant %#v", items[0], want)
	}
	// A key given twice: the last value counts.
	if got, err := ParsePolicies(`"a";q=1;q=2`); err != nil || got[0].Quota != 2 {
		t.Errorf("q twice: %+v, %v", got, err)
	}
}

// The draft's examples that a sluice policy can be in, produced by Values
// from the decision the example describes: the same field values,
// byte for byte, and Retry-After where the example has one. The decisions
// are the limit.Result a store answers (the HTTP door's end-to-end test,
// in httpfront, gets them from the real limiter).
func TestDraftExamplesProduced(t *testing.T) {
	t.Parallel()
	fixed := func(name string, q int64) *limit.Policy {
		return &limit.Policy{Name: name, Algorithm: limit.FixedWindow, Limit: q, Period: time.Minute}
	}
	cases := []struct {
		section        string
		p              *limit.Policy
		r              limit.Result
		policy, state  string
		retryAfter     int64 // -1: none
		wantRetryAfter string
	}{
		// 3.2 and 4: 100 per 10 s, 50 left with 30 s to go.
		{"3.2, 4", &limit.Policy{Name: "default", Algorithm: limit.FixedWindow, Limit: 100, Period: 10 * time.Second},
			limit.Result{Allowed: true, Limit: 100, Remaining: 50, RetryAfterMs: -1, ResetAfterMs: 30_000},
			`"default";q=100;w=10`, `"default";r=50;t=30`, -1, ""},
		// B.1.1: the last unit of the window spent, 50 s before it ends.
		{"B.1.1", fixed("default", 10), limit.Result{Allowed: true, Limit: 10, Remaining: 0, RetryAfterMs: -1, ResetAfterMs: 50_000},
			`"default";q=10;w=60`, `"default";r=0;t=50`, -1, ""},
		// B.1.2: 4900 of a daily 5000 spent by 14:00, the day ends in 10 h.
		{"B.1.2", &limit.Policy{Name: "dayLimit", Algorithm: limit.FixedWindow, Limit: 5000, Period: 24 * time.Hour, Calendar: limit.CalendarDay},
			limit.Result{Allowed: true, Limit: 5000, Remaining: 100, RetryAfterMs: -1, ResetAfterMs: 36_000_000},
			`"dayLimit";q=5000;w=86400`, `"dayLimit";r=100;t=36000`, -1, ""},
		// B.1.3: 100 per minute, 40 spent in the first 2 s.
		{"B.1.3", fixed("basic", 100), limit.Result{Allowed: true, Limit: 100, Remaining: 60, RetryAfterMs: -1, ResetAfterMs: 58_000},
			`"basic";q=100;w=60`, `"basic";r=60;t=58`, -1, ""},
		// B.1.4: refused, Retry-After and t the same moment, 5 s on.
		{"B.1.4", &limit.Policy{Name: "default", Limit: 1, Rate: 1, Period: 5 * time.Second},
			limit.Result{Limit: 1, Remaining: 0, RetryAfterMs: 4_200, ResetAfterMs: 4_200},
			`"default";q=1;w=5`, `"default";r=0;t=5`, 5, "5"},
		// B.2.1: 99 left for the next 50 s of a 100-per-minute window.
		{"B.2.1", fixed("fixedwindow", 100), limit.Result{Allowed: true, Limit: 100, Remaining: 99, RetryAfterMs: -1, ResetAfterMs: 50_000},
			`"fixedwindow";q=100;w=60`, `"fixedwindow";r=99;t=50`, -1, ""},
		// 8.5: a daily quota whose day ends in 86400 s (at 00:00:00).
		{"8.5", &limit.Policy{Name: "daily", Algorithm: limit.FixedWindow, Limit: 2, Period: 24 * time.Hour, Calendar: limit.CalendarDay},
			limit.Result{Allowed: true, Limit: 2, Remaining: 1, RetryAfterMs: -1, ResetAfterMs: 86_400_000},
			`"daily";q=2;w=86400`, `"daily";r=1;t=86400`, -1, ""},
	}
	for _, c := range cases {
		pol, state := Values(c.p, &c.r)
		if pol != c.policy || state != c.state {
			t.Errorf("section %s:\n got RateLimit-Policy: %s, RateLimit: %s\nwant RateLimit-Policy: %s, RateLimit: %s", c.section, pol, state, c.policy, c.state)
		}
		retry, ok := RetryAfter(&c.r)
		if !ok {
			retry = -1
		}
		if retry != c.retryAfter {
			t.Errorf("section %s: Retry-After %d, want %d", c.section, retry, c.retryAfter)
		}
		// Section 6: a Retry-After never names a moment before the end of
		// the effective window.
		if lim, err := ParseLimits(state); err != nil || (ok && retry < lim[0].Window) {
			t.Errorf("section %s: %s parsed %+v, %v; Retry-After %d", c.section, state, lim, err, retry)
		}
	}
}

// Whatever Values writes parses under -11 and says what it was given:
// the name (printable ASCII), q, w, r and t.
func FuzzValuesParse(f *testing.F) {
	f.Add("api", int64(100), int64(50), int64(1_000_000_000), int64(42), int64(-1), int64(1500), true)
	f.Add(`we"ird\näme`, int64(1)<<60, int64(1), int64(1), int64(-7), int64(3000), int64(9000), false)
	f.Fuzz(func(t *testing.T, name string, lim, rate, periodNs, remaining, retry, reset int64, allowed bool) {
		if lim < 1 || rate < 1 || periodNs < 1 {
			return
		}
		p := &limit.Policy{Name: name, Limit: lim, Rate: rate, Period: time.Duration(periodNs)}
		r := &limit.Result{Allowed: allowed, Limit: lim, Remaining: remaining, RetryAfterMs: retry, ResetAfterMs: reset}
		pol, state := Values(p, r)
		ps, err := ParsePolicies(pol)
		if err != nil || len(ps) != 1 {
			t.Fatalf("RateLimit-Policy: %s: %v", pol, err)
		}
		ls, err := ParseLimits(state)
		if err != nil || len(ls) != 1 {
			t.Fatalf("RateLimit: %s: %v", state, err)
		}
		if ps[0].Name != ls[0].Name || ps[0].Quota != min(lim, maxSFInteger) || ps[0].Window != Window(p) ||
			ls[0].Available != min(max(0, remaining), maxSFInteger) || ls[0].Window != min(Reset(r), maxSFInteger) {
			t.Fatalf("%s | %s parsed %+v %+v", pol, state, ps[0], ls[0])
		}
		if printable(name) && ps[0].Name != name {
			t.Fatalf("name %q came back %q", name, ps[0].Name)
		}
	})
}

func printable(s string) bool {
	return !bytes.ContainsFunc([]byte(s), func(r rune) bool { return r < 0x20 || r > 0x7e })
}

// Any bytes: an error or a list, never a panic (a client reads what any
// server, or a man in the middle, sends).
func FuzzParseField(f *testing.F) {
	for _, s := range []string{`"burst";q=100;w=60,"daily";q=1000;w=86400`, `"default";r=999;pk=:dHJpYWwxMjEzMjM=:`,
		`tok;a=-12;b=4.125;c="x\"y";d=:AQID:;e=?0;f;g=@1659578233;h=%"f%c3%bc"`, `("a" "b")`, `"a";q=%"%`, `:`, `-`, `?`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		items, err := ParseList(s)
		if err == nil && strings.TrimSpace(s) != "" && len(items) == 0 {
			t.Fatalf("%q: no error and no item", s)
		}
		_, _ = ParsePolicies(s)
		_, _ = ParseLimits(s)
	})
}
