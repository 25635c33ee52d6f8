package httpfront

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/ratelimitheader"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/local"
)

// The HTTP door over a real listener, the real limiter and the in-process
// store, its clock put where draft-ietf-httpapi-ratelimit-headers-11's
// examples stand: the fields a client receives are the draft's, byte for
// byte, and parse as the draft says. Policies carry the examples' names.
func TestDraftExamplesOverHTTP(t *testing.T) {
	t.Parallel()
	policies := []*limit.Policy{
		{Name: "fixedwindow", Match: "fixedwindow:*", Algorithm: limit.FixedWindow, Limit: 100, Period: time.Minute, OnStoreError: limit.FailClosed},
		{Name: "basic", Match: "basic:*", Algorithm: limit.FixedWindow, Limit: 100, Period: time.Minute, OnStoreError: limit.FailClosed},
		{Name: "dayLimit", Match: "dayLimit:*", Algorithm: limit.FixedWindow, Limit: 5000, Period: 24 * time.Hour, Calendar: limit.CalendarDay, OnStoreError: limit.FailClosed},
		{Name: "default", Match: "default:*", Limit: 1, Rate: 1, Period: 5 * time.Second, OnStoreError: limit.FailClosed},
	}
	midnight := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC) // a UTC day and a minute window both start here
	var clock atomic.Int64                                   // the store's now, read by the server's goroutines
	store := local.New(local.Config{Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	l, err := limiter.New(limiter.Config{Store: store, Policies: limiter.MatcherFunc(func(key string) *limit.Policy {
		for _, p := range policies {
			if strings.HasPrefix(key, strings.TrimSuffix(p.Match, "*")) {
				return p
			}
		}
		return nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newServer(t, Config{Decider: l}))
	t.Cleanup(srv.Close)

	cases := []struct {
		section         string
		now             time.Duration // after midnight
		query           string
		status          int
		policy, state   string // as the draft prints them
		retryAfter      string // "" none
		wantR, wantT, q int64
	}{
		// B.2.1: "The client has 99 quota units left for the next 50 seconds."
		{"B.2.1", 10 * time.Second, "key=fixedwindow:a", 200, `"fixedwindow";q=100;w=60`, `"fixedwindow";r=99;t=50`, "", 99, 50, 100},
		// B.1.3: "After 2 seconds the client consumed 40 quota units".
		{"B.1.3", 2 * time.Second, "key=basic:a&cost=40", 200, `"basic";q=100;w=60`, `"basic";r=60;t=58`, "", 60, 58, 100},
		// B.1.2: 5000 a day, "4900 quota units in the first 14 hours".
		{"B.1.2", 14 * time.Hour, "key=dayLimit:a&cost=4900", 200, `"dayLimit";q=5000;w=86400`, `"dayLimit";r=100;t=36000`, "", 100, 36000, 5000},
		// B.1.4: the quota exhausted, throttled with Retry-After naming
		// the moment t names (the draft writes it as a date 5 s on).
		{"B.1.4", 0, "key=default:a", 200, `"default";q=1;w=5`, `"default";r=0;t=5`, "", 0, 5, 1},
		{"B.1.4", 0, "key=default:a", 429, `"default";q=1;w=5`, `"default";r=0;t=5`, "5", 0, 5, 1},
	}
	for _, c := range cases {
		clock.Store(midnight.Add(c.now).UnixNano())
		resp, err := srv.Client().Get(srv.URL + "/v1/check?" + c.query)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		h := resp.Header
		if resp.StatusCode != c.status || h.Get("RateLimit-Policy") != c.policy || h.Get("RateLimit") != c.state || h.Get("Retry-After") != c.retryAfter {
			t.Errorf("section %s, GET /v1/check?%s:\n got %d RateLimit-Policy: %s | RateLimit: %s | Retry-After: %q\nwant %d RateLimit-Policy: %s | RateLimit: %s | Retry-After: %q",
				c.section, c.query, resp.StatusCode, h.Get("RateLimit-Policy"), h.Get("RateLimit"), h.Get("Retry-After"),
				c.status, c.policy, c.state, c.retryAfter)
			continue
		}
		ps, err := ratelimitheader.ParsePolicies(h.Values("RateLimit-Policy")...)
		if err != nil || len(ps) != 1 || ps[0].Quota != c.q {
			t.Errorf("section %s: RateLimit-Policy parsed %+v, %v", c.section, ps, err)
		}
		ls, err := ratelimitheader.ParseLimits(h.Values("RateLimit")...)
		if err != nil || len(ls) != 1 || ls[0].Name != ps[0].Name || ls[0].Available != c.wantR || ls[0].Window != c.wantT {
			t.Errorf("section %s: RateLimit parsed %+v, %v", c.section, ls, err)
		}
		// Section 6: Retry-After no earlier than the end of the effective window.
		if c.retryAfter != "" {
			if secs, err := strconv.ParseInt(c.retryAfter, 10, 64); err != nil || secs < ls[0].Window {
				t.Errorf("section %s: Retry-After %s before t=%d", c.section, c.retryAfter, ls[0].Window)
			}
		}
	}
}

// Every decision of the door's own test policies carries fields that parse
// under -11, whatever the answer: admitted, refused, refused for ever, a
// name that needs escaping.
func TestDoorHeadersParse(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{})
	for _, target := range []string{"/v1/check?key=three:p", "/v1/check?key=three:p&cost=3", "/v1/check?key=three:p&cost=9",
		"/v1/check?key=win:p&cost=5", "/v1/check?key=win:p", "/v1/check?key=weird:p", "/v1/check?key=dark:p&cost=2"} {
		resp := do(t, s, http.MethodGet, target, "")
		resp.Body.Close()
		if _, err := ratelimitheader.ParsePolicies(resp.Header.Values("RateLimit-Policy")...); err != nil {
			t.Errorf("%s: %d %v", target, resp.StatusCode, err)
		}
		if _, err := ratelimitheader.ParseLimits(resp.Header.Values("RateLimit")...); err != nil {
			t.Errorf("%s: %d %v", target, resp.StatusCode, err)
		}
	}
}
