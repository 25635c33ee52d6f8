package httpfront

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/acl"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/local"
)

// testUsers: acme may take, hold slots and adjust on its own keys; beta
// may only take, on its own; "default" is off, so a request without
// credentials is refused.
const testUsers = `
user acme on >secret ~three:acme:* ~win:acme:* ~jobs:acme:* +@limit +@slot +@adjust
user beta on >b3ta ~three:beta:* +@limit
`

// usersServer is a Server over the in-process store (the policies of
// helpers_test.go and "jobs", two slots) with the users of text.
func usersServer(t *testing.T, text string) (*Server, *acl.Holder) {
	t.Helper()
	l, err := acl.Parse("users.acl", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	users := acl.NewHolder(l)
	jobs := &limit.Policy{Name: "jobs", Match: "jobs*", Algorithm: limit.Concurrency, Limit: 2, Period: time.Minute, OnStoreError: limit.FailClosed}
	lim, err := limiter.New(limiter.Config{Store: local.New(local.Config{Now: func() time.Time { return t0 }}),
		Policies: limiter.MatcherFunc(func(k string) *limit.Policy {
			if strings.HasPrefix(k, "jobs") {
				return jobs
			}
			return matchPolicy(k)
		})})
	if err != nil {
		t.Fatal(err)
	}
	return newServer(t, Config{Decider: lim, Users: users}), users
}

func basicAuth(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// Every endpoint maps its credentials to a user and checks its command and
// every key it names: 401 without or with wrong credentials, 403 for a
// command or a key the user may not use, and only then a decision.
func TestUsersOnEveryEndpoint(t *testing.T) {
	t.Parallel()
	s, _ := usersServer(t, testUsers)
	acme, beta := basicAuth("acme", "secret"), "Bearer beta:b3ta"
	cases := []struct {
		name, auth, method, target, body string
		status                           int
		errText                          string // the JSON error, "" for a decision
	}{
		{"no credentials", "", "POST", "/v1/take", `{"key":"three:acme:1"}`, 401, "authentication required: Authorization: Basic user:password, or Bearer user:password or the default password"},
		{"wrong password", basicAuth("acme", "nope"), "POST", "/v1/take", `{"key":"three:acme:1"}`, 401, "invalid credentials"},
		{"no such user", basicAuth("mallory", "secret"), "GET", "/v1/check?key=three:acme:1", "", 401, "invalid credentials"},
		{"bearer of the off default user", "Bearer secret", "POST", "/v1/take", `{"key":"three:acme:1"}`, 401, "invalid credentials"},
		{"basic take", acme, "POST", "/v1/take", `{"key":"three:acme:1"}`, 200, ""},
		{"bearer user:pass take", "Bearer acme:secret", "POST", "/v1/take", `{"key":"three:acme:2"}`, 200, ""},
		{"check", acme, "GET", "/v1/check?key=win:acme:1", "", 200, ""},
		{"check of another tenant's key", acme, "GET", "/v1/check?key=three:beta:1", "", 403, "NOPERM No permissions to access a key"},
		{"check by header of another tenant's key", acme, "GET", "/v1/check", "", 403, "NOPERM No permissions to access a key"},
		{"take of another tenant's key", beta, "POST", "/v1/take", `{"key":"three:acme:1"}`, 403, "NOPERM No permissions to access a key"},
		{"batch with one foreign key", acme, "POST", "/v1/take", `[{"key":"three:acme:3"},{"key":"three:beta:3"}]`, 403, "NOPERM No permissions to access a key"},
		{"adjust", acme, "POST", "/v1/adjust", `{"key":"three:acme:4","delta":1}`, 200, ""},
		{"adjust without @adjust", beta, "POST", "/v1/adjust", `{"key":"three:beta:4","delta":-1}`, 403, "NOPERM User beta has no permissions to run the 'rl.adjust' command"},
		{"adjust of another tenant's key", acme, "POST", "/v1/adjust", `{"key":"three:beta:4","delta":-1}`, 403, "NOPERM No permissions to access a key"},
		{"acquire", acme, "POST", "/v1/acquire", `{"key":"jobs:acme:1"}`, 200, ""},
		{"acquire without @slot", beta, "POST", "/v1/acquire", `{"key":"jobs:beta:1"}`, 403, "NOPERM User beta has no permissions to run the 'rl.acquire' command"},
		{"acquire of another tenant's key", acme, "POST", "/v1/acquire", `{"key":"jobs:beta:1"}`, 403, "NOPERM No permissions to access a key"},
		{"release of another tenant's key", acme, "POST", "/v1/release", `{"key":"jobs:beta:1","token":"00000000000000000000000000000000"}`, 403, "NOPERM No permissions to access a key"},
		{"bad input is 400 before 403", beta, "POST", "/v1/take", `{"key":"three:acme:1","cost":0}`, 400, "cost must be a positive integer"},
	}
	for _, c := range cases {
		var header []string
		if c.auth != "" {
			header = []string{"Authorization", c.auth}
		}
		if strings.HasPrefix(c.name, "check by header") {
			header = append(header, "X-RateLimit-Key", "three:beta:1")
		}
		resp := do(t, s, c.method, c.target, c.body, header...)
		var body any
		decode(t, resp, &body)
		m, _ := body.(map[string]any)
		gotErr, _ := m["error"].(string)
		if resp.StatusCode != c.status || gotErr != c.errText {
			t.Errorf("%s: %d %q, want %d %q", c.name, resp.StatusCode, gotErr, c.status, c.errText)
		}
		if c.status == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), `Bearer realm="sluice"`) {
			t.Errorf("%s: WWW-Authenticate %q", c.name, resp.Header.Values("WWW-Authenticate"))
		}
		if strings.Contains(fmt.Sprint(body), "secret") || strings.Contains(fmt.Sprint(body), "b3ta") {
			t.Errorf("%s: a password in the body %v", c.name, body)
		}
	}
}

// A refused request spends nothing: after a batch refused for one foreign
// key, and a foreign tenant's refused takes, the owner's bucket is whole.
func TestRefusedRequestSpendsNothing(t *testing.T) {
	t.Parallel()
	s, _ := usersServer(t, testUsers)
	acme := basicAuth("acme", "secret")
	for range 5 {
		if resp := do(t, s, "POST", "/v1/take", `[{"key":"three:acme:x","cost":3},{"key":"three:beta:x"}]`, "Authorization", acme); resp.StatusCode != 403 {
			t.Fatalf("batch with a foreign key: %d, want 403", resp.StatusCode)
		}
		if resp := do(t, s, "GET", "/v1/check?key=three:acme:x&cost=3", "", "Authorization", "Bearer beta:b3ta"); resp.StatusCode != 403 {
			t.Fatalf("a foreign tenant's check: %d, want 403", resp.StatusCode)
		}
	}
	var got resultBody
	decode(t, do(t, s, "POST", "/v1/take", `{"key":"three:acme:x","cost":3}`, "Authorization", acme), &got)
	if want := (resultBody{Allowed: true, Limit: 3, Remaining: 0, RetryAfterMs: -1, ResetAfterMs: 3000, DecidedBy: "embedded"}); got != want {
		t.Errorf("the owner's take after the refusals:\n got %+v\nwant %+v", got, want)
	}
}

// The users are read per request: a reload applies to the next one, and
// a deleted user's credentials stop working at once.
func TestUsersReload(t *testing.T) {
	t.Parallel()
	s, users := usersServer(t, testUsers)
	acme := basicAuth("acme", "secret")
	status := func(auth, key string) int {
		t.Helper()
		resp := do(t, s, "GET", "/v1/check?key="+key, "", "Authorization", auth)
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(acme, "win:shared:1"); got != 403 {
		t.Fatalf("before the reload: %d, want 403", got)
	}
	next, err := acl.Parse("users.acl", []byte("user acme on >secret ~win:* +@limit\n"))
	if err != nil {
		t.Fatal(err)
	}
	users.Store(next)
	got := []int{status(acme, "win:shared:1"), status("Bearer beta:b3ta", "three:beta:1")}
	if want := []int{200, 401}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after the reload: acme on win:shared:1, the deleted beta: %v, want %v", got, want)
	}
}

// --requirepass alone is the default user: a bare bearer token, Basic
// with no user name or "default", and Bearer default:<password>; every
// command on every key.
func TestRequirePassIsTheDefaultUser(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{RequirePass: "pw:with colon"})
	cases := []struct {
		auth   string
		status int
	}{
		{"Bearer pw:with colon", 200},
		{"Bearer default:pw:with colon", 200},
		{basicAuth("", "pw:with colon"), 200},
		{basicAuth("default", "pw:with colon"), 200},
		{"Basic " + base64.RawStdEncoding.EncodeToString([]byte(":pw:with colon")), 200},
		{basicAuth("default", "pw"), 401},
		{"Bearer pw", 401},
		{"Basic %%%", 401},
		{"Negotiate abc", 401},
	}
	for _, c := range cases {
		resp := do(t, s, "GET", "/v1/check?key=win:any", "", "Authorization", c.auth)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%q: %d, want %d", c.auth, resp.StatusCode, c.status)
		}
	}
	// With no password at all, any request is the default user, whatever
	// credentials it carries: Traefik's forwardAuth copies the client's own
	// Authorization (its Basic login to the application, say) into the
	// check, and sluice had no password to compare it with.
	open := newServer(t, Config{})
	for i, auth := range []string{"", "Bearer anything", "Bearer acme:x", basicAuth("", "x"), basicAuth("alice", "app-password"), "Basic !!"} {
		resp := do(t, open, "GET", fmt.Sprintf("/v1/check?key=win:open%d", i), "", "Authorization", auth)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("no password, %q: %d, want 200", auth, resp.StatusCode)
		}
	}
}

// Refusals with credentials go to ACL LOG, context "http", without the
// password; a request with no credentials does not (as NOAUTH in Redis).
func TestRefusalsInACLLog(t *testing.T) {
	t.Parallel()
	s, users := usersServer(t, testUsers)
	do(t, s, "POST", "/v1/take", `{"key":"three:acme:1"}`).Body.Close()
	do(t, s, "POST", "/v1/take", `{"key":"three:acme:1"}`, "Authorization", basicAuth("acme", "guess")).Body.Close()
	do(t, s, "POST", "/v1/take", `{"key":"three:acme:1"}`, "Authorization", "Bearer not-a-user-password").Body.Close()
	do(t, s, "POST", "/v1/take", `{"key":"three:acme:1"}`, "Authorization", "Bearer beta:b3ta").Body.Close()
	do(t, s, "POST", "/v1/adjust", `{"key":"three:beta:1","delta":-1}`, "Authorization", "Bearer beta:b3ta").Body.Close()
	var got []string
	for _, e := range users.Log().Entries(-1) {
		got = append(got, fmt.Sprintf("%s %s %s %s %d", e.Reason, e.Context, e.Object, e.Username, e.Count))
		if !strings.Contains(e.ClientInfo, "addr=") || strings.Contains(e.ClientInfo+e.Object+e.Username, "guess") {
			t.Errorf("entry %+v", e)
		}
	}
	want := []string{ // newest first
		"command http rl.adjust beta 1",
		"key http three:acme:1 beta 1",
		"auth http AUTH default 1",
		"auth http AUTH acme 1",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ACL LOG:\n got %q\nwant %q", got, want)
	}
}
