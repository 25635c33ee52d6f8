package httpfront

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/local"
)

func slotServer(t *testing.T) *Server {
	t.Helper()
	jobs := &limit.Policy{Name: "jobs", Match: "jobs*", Algorithm: limit.Concurrency, Limit: 2, Period: time.Minute, OnStoreError: limit.FailClosed}
	l, err := limiter.New(limiter.Config{Store: local.New(local.Config{Now: func() time.Time { return t0 }}),
		Policies: limiter.MatcherFunc(func(k string) *limit.Policy {
			if strings.HasPrefix(k, "jobs") {
				return jobs
			}
			return matchPolicy(k)
		})})
	if err != nil {
		t.Fatal(err)
	}
	return newServer(t, Config{Decider: l})
}

// POST /v1/acquire and /v1/release: the seven fields as JSON, the token
// that frees the slot, and the errors of a bad body.
func TestAcquireRelease(t *testing.T) {
	t.Parallel()
	s := slotServer(t)
	var a acquireBody
	decode(t, do(t, s, "POST", "/v1/acquire", `{"key":"jobs:1","ttl_ms":5000}`), &a)
	if !a.Allowed || a.Limit != 2 || a.Remaining != 1 || a.RetryAfterMs != -1 || a.ResetAfterMs != 5000 || a.DecidedBy != "embedded" || len(a.Token) != 32 {
		t.Fatalf("acquire: %+v", a)
	}
	var b acquireBody
	decode(t, do(t, s, "POST", "/v1/acquire", `{"key":"jobs:1"}`), &b)
	var c acquireBody
	decode(t, do(t, s, "POST", "/v1/acquire", `{"key":"jobs:1"}`), &c)
	if !b.Allowed || c.Allowed || c.Token != "" || c.RetryAfterMs != 5000 || c.ResetAfterMs != 60_000 {
		t.Fatalf("second and third: %+v %+v", b, c)
	}
	var r releaseBody
	decode(t, do(t, s, "POST", "/v1/release", `{"key":"jobs:2","token":"`+a.Token+`"}`), &r)
	if r.Held {
		t.Fatal("a token released a slot of another key")
	}
	decode(t, do(t, s, "POST", "/v1/release", `{"key":"jobs:1","token":"`+a.Token+`"}`), &r)
	if !r.Held {
		t.Fatal("release: not held")
	}
	decode(t, do(t, s, "POST", "/v1/release", `{"key":"jobs:1","token":"`+a.Token+`"}`), &r)
	if r.Held {
		t.Fatal("second release: held")
	}
	for _, tc := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"GET", "/v1/acquire", "", 405, "method not allowed"},
		{"POST", "/v1/acquire", `{"ttl_ms":5}`, 400, `key\" is required`},
		{"POST", "/v1/acquire", `{"key":"jobs:1","ttl_ms":0}`, 400, "ttl_ms must be a positive integer of at most 86400000"},
		{"POST", "/v1/acquire", `{"key":"jobs:1","ttl_ms":86400001}`, 400, "ttl_ms must be a positive integer"},
		{"POST", "/v1/acquire", `{"key":"jobs:1","ttl_ms":"5"}`, 400, "ttl_ms must be a positive integer"},
		{"POST", "/v1/acquire", `{"key":"jobs:1","cost":1}`, 400, "unknown field"},
		{"POST", "/v1/acquire", `{"key":"three"}`, 400, "rl.acquire does not apply to token_bucket policy 'three': use RL.TAKE"},
		{"POST", "/v1/take", `{"key":"jobs:1"}`, 400, "rl.take does not apply to concurrency policy 'jobs'"},
		{"POST", "/v1/acquire", `{"key":"none"}`, 404, "no policy matches key"},
		{"POST", "/v1/release", `{"key":"jobs:1"}`, 400, `token\" is required`},
		{"POST", "/v1/release", `{"key":"jobs:1","token":""}`, 400, "token must not be empty"},
		{"POST", "/v1/release", `{"key":"jobs:1","token":"` + strings.Repeat("f", 65) + `"}`, 400, "token must be at most 64 bytes"},
	} {
		resp := do(t, s, tc.method, tc.path, tc.body)
		if got := bodyText(t, resp); resp.StatusCode != tc.status || !strings.Contains(got, tc.want) {
			t.Errorf("%s %s %s: %d %s, want %d %q", tc.method, tc.path, tc.body, resp.StatusCode, got, tc.status, tc.want)
		}
	}
}
