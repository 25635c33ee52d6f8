package httpfront

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

func TestTakeOneAndBatch(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{})
	resp := do(t, s, "POST", "/v1/take", `{"key": "three:a", "cost": 2}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	var one resultBody
	decode(t, resp, &one)
	if want := (resultBody{Allowed: true, Limit: 3, Remaining: 1, RetryAfterMs: -1, ResetAfterMs: 2000, DecidedBy: "embedded"}); one != want {
		t.Errorf("take cost 2:\n got %+v\nwant %+v", one, want)
	}

	// A batch is decided in order, in one call: the second take of
	// three:a finds the token the first left, the third none.
	resp = do(t, s, "POST", "/v1/take", `[{"key":"three:a"},{"key":"three:a"},{"key":"win:x","cost":5},{"key":"none"}]`)
	if resp.StatusCode != 200 {
		t.Fatalf("batch status %d", resp.StatusCode)
	}
	var got []map[string]any
	decode(t, resp, &got)
	want := []string{
		`map[allowed:true decided_by:embedded limit:3 remaining:0 reset_after_ms:3000 retry_after_ms:-1]`,
		`map[allowed:false decided_by:embedded limit:3 remaining:0 reset_after_ms:3000 retry_after_ms:1000]`,
		`map[allowed:true decided_by:embedded limit:5 remaining:0 reset_after_ms:40000 retry_after_ms:-1]`,
		`map[error:no policy matches key 'none' status:404]`,
	}
	if len(got) != len(want) {
		t.Fatalf("batch answered %d items, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if g := fmt.Sprint(got[i]); g != want[i] {
			t.Errorf("item %d:\n got %s\nwant %s", i, g, want[i])
		}
	}

	// An empty batch decides nothing and answers an empty array.
	if resp := do(t, s, "POST", "/v1/take", ` []`); resp.StatusCode != 200 || strings.TrimSpace(bodyText(t, resp)) != "[]" {
		t.Errorf("empty batch: %d", resp.StatusCode)
	}
}

func TestCheckCodesAndHeaders(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{})
	type want struct {
		status  int
		headers map[string]string // "" = must be absent
		by      string
	}
	absent := ""
	steps := []struct {
		method, target string
		want           want
	}{
		{"GET", "/v1/check?key=three:k", want{200, map[string]string{
			"RateLimit-Policy": `"three";q=3;w=3`, "RateLimit": `"three";r=2;t=1`, "Retry-After": absent,
			"X-RateLimit-Limit": absent, "X-RateLimit-Remaining": absent, "X-RateLimit-Reset": absent}, "embedded"}},
		{"POST", "/v1/check?key=three:k&cost=2&legacy=1", want{200, map[string]string{
			"RateLimit-Policy": `"three";q=3;w=3`, "RateLimit": `"three";r=0;t=3`, "Retry-After": absent,
			"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "3"}, "embedded"}},
		{"GET", "/v1/check?key=three:k&legacy=true", want{429, map[string]string{
			"RateLimit-Policy": `"three";q=3;w=3`, "RateLimit": `"three";r=0;t=1`, "Retry-After": "1",
			"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "3"}, "embedded"}},
		// cost > limit can never succeed: 429 and no Retry-After.
		{"GET", "/v1/check?key=three:other&cost=4", want{429, map[string]string{
			"RateLimit": `"three";r=3;t=0`, "Retry-After": absent}, "embedded"}},
		// A window policy says its window; 5 per minute, 40 s left of it at t0.
		{"GET", "/v1/check?key=win:k&cost=5", want{200, map[string]string{
			"RateLimit-Policy": `"win";q=5;w=60`, "RateLimit": `"win";r=0;t=40`}, "embedded"}},
		{"HEAD", "/v1/check?key=win:k&legacy=0", want{429, map[string]string{
			"RateLimit-Policy": `"win";q=5;w=60`, "Retry-After": "40", "X-RateLimit-Limit": absent}, "embedded"}},
		// shadow: decided and counted, always admitted.
		{"GET", "/v1/check?key=dark:k&cost=1", want{200, nil, "shadow"}},
		{"GET", "/v1/check?key=dark:k&cost=1", want{200, nil, "shadow"}},
		// A name an sf-string cannot hold is escaped, never a broken header.
		{"GET", "/v1/check?key=weird", want{200, map[string]string{"RateLimit-Policy": `"we\"ird\\n??me";q=2;w=120`}, "embedded"}},
	}
	for i, st := range steps {
		resp := do(t, s, st.method, st.target, "")
		if resp.StatusCode != st.want.status {
			t.Errorf("step %d %s %s: status %d, want %d", i, st.method, st.target, resp.StatusCode, st.want.status)
		}
		for h, v := range st.want.headers {
			if got := resp.Header.Get(h); got != v {
				t.Errorf("step %d %s: %s = %q, want %q", i, st.target, h, got, v)
			}
		}
		if st.method == "HEAD" {
			if b := bodyText(t, resp); b != "" {
				t.Errorf("HEAD answered a body %q", b)
			}
			continue
		}
		var r resultBody
		decode(t, resp, &r)
		if r.DecidedBy != st.want.by || r.Allowed != (st.want.status == 200) {
			t.Errorf("step %d %s: body %+v, want decided_by %s", i, st.target, r, st.want.by)
		}
	}
}

func TestCheckKeyFromHeader(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{KeyHeader: "x-client-key"})
	cases := []struct {
		name, target string
		header       []string
		status       int
		policy       string
	}{
		{"header", "/v1/check", []string{"X-Client-Key", "three:h"}, 200, `"three";q=3;w=3`},
		{"query wins", "/v1/check?key=win:q", []string{"X-Client-Key", "three:h"}, 200, `"win";q=5;w=60`},
		{"default header not read", "/v1/check", []string{"X-RateLimit-Key", "three:h"}, 400, ""},
		{"header twice", "/v1/check", []string{"X-Client-Key", "three:a", "X-Client-Key", "three:b"}, 400, ""},
		{"empty header", "/v1/check", []string{"X-Client-Key", ""}, 400, ""},
	}
	for _, c := range cases {
		resp := do(t, s, "GET", c.target, "", c.header...)
		if resp.StatusCode != c.status || resp.Header.Get("RateLimit-Policy") != c.policy {
			t.Errorf("%s: %d %q, want %d %q (%s)", c.name, resp.StatusCode, resp.Header.Get("RateLimit-Policy"), c.status, c.policy, bodyText(t, resp))
		}
	}
	if _, err := New(Config{Decider: newLimiter(t), KeyHeader: "bad header"}); err == nil {
		t.Error("a header name with a space was accepted")
	}
}

func TestErrorCodes(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{MaxBodyBytes: 512, MaxKeyBytes: 16, MaxBatch: 3})
	cases := []struct {
		method, target, body string
		status               int
		errText              string // a part of the error
	}{
		{"GET", "/v1/check?key=none:x", "", 404, "no policy matches key 'none:x'"},
		{"POST", "/v1/take", `{"key":"none"}`, 404, "no policy matches key 'none'"},
		{"GET", "/v2/take", "", 404, "no such endpoint"},
		{"GET", "/", "", 404, "no such endpoint"},
		{"GET", "/v1/take", "", 405, "use POST"},
		{"PUT", "/v1/check?key=three", "", 405, "use GET, HEAD, POST"},
		{"DELETE", "/v1/check", "", 405, "use GET"},
		{"GET", "/v1/check", "", 400, "no key"},
		{"GET", "/v1/check?key=", "", 400, "key must not be empty"},
		{"GET", "/v1/check?key=three:0123456789abcdef", "", 400, "key is too long (max 16 bytes)"},
		{"GET", "/v1/check?key=a&key=b", "", 400, "key given more than once"},
		{"GET", "/v1/check?key=three&cost=0", "", 400, "cost must be a positive integer"},
		{"GET", "/v1/check?key=three&cost=-1", "", 400, "cost must be a positive integer"},
		{"GET", "/v1/check?key=three&cost=1.0", "", 400, "cost must be a positive integer"},
		{"GET", "/v1/check?key=three&cost=%2B1", "", 400, "cost must be a positive integer"},
		{"GET", "/v1/check?key=three&cost=9223372036854775808", "", 400, "cost must be a positive integer"},
		{"GET", "/v1/check?key=three&cost=1&cost=2", "", 400, "cost given more than once"},
		{"GET", "/v1/check?key=three&legacy=yes", "", 400, "legacy must be"},
		{"GET", "/v1/check?key=%zz", "", 400, "bad query"},
		{"POST", "/v1/take", ``, 400, "body must be a JSON object"},
		{"POST", "/v1/take", `"three"`, 400, "body must be a JSON object"},
		{"POST", "/v1/take", `{"key":"three"`, 400, "bad JSON"},
		{"POST", "/v1/take", `{"key":"three"} {}`, 400, "more data after"},
		{"POST", "/v1/take", `{"key":"three","coast":2}`, 400, `unknown field "coast"`},
		{"POST", "/v1/take", `{"key":3}`, 400, `field "key" must be a string`},
		{"POST", "/v1/take", `{"cost":1}`, 400, `"key" is required`},
		{"POST", "/v1/take", `{"key":"three","cost":1.5}`, 400, "cost must be a positive integer"},
		{"POST", "/v1/take", `{"key":"three","cost":1e2}`, 400, "cost must be a positive integer"},
		{"POST", "/v1/take", `{"key":"three","cost":"2"}`, 400, "cost must be a positive integer"},
		{"POST", "/v1/take", `{"key":"three","cost":0}`, 400, "cost must be a positive integer"},
		{"POST", "/v1/take", `{"key":"three","cost":-3}`, 400, "cost must be a positive integer"},
		{"POST", "/v1/take", `{"key":"three","cost":99999999999999999999}`, 400, "cost must be a positive integer"},
		{"POST", "/v1/take", `[{"key":"three"},{"key":""}]`, 400, "request 1: key must not be empty"},
		{"POST", "/v1/take", `[{"key":"three"},{"key":"three"},{"key":"three"},{"key":"three"}]`, 413, "at most 3 requests, got 4"},
		{"POST", "/v1/take", `{"key":"` + strings.Repeat("a", 600) + `"}`, 413, "larger than 512 bytes"},
	}
	for _, c := range cases {
		resp := do(t, s, c.method, c.target, c.body)
		var e errorBody
		decode(t, resp, &e)
		if resp.StatusCode != c.status || !strings.Contains(e.Error, c.errText) {
			t.Errorf("%s %s %.40q: %d %q, want %d containing %q", c.method, c.target, c.body, resp.StatusCode, e.Error, c.status, c.errText)
		}
		if resp.Header.Get("RateLimit") != "" || resp.Header.Get("Retry-After") != "" {
			t.Errorf("%s %s: an error carries decision headers: %v", c.method, c.target, resp.Header)
		}
		if c.status == 405 && resp.Header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", c.method, c.target)
		}
	}

	// Errors the limiter can return besides no policy: an error Redis
	// answered is 500, an unavailable store (should one get through) 503.
	for _, c := range []struct {
		err    error
		status int
	}{
		{errors.New("ERR Error running script: boom"), 500},
		{&limit.UnavailableError{Node: "n1", Err: errors.New("refused")}, 503},
	} {
		s := newServer(t, Config{Decider: deciderFunc(func(_ context.Context, reqs []limit.Request, out []limit.Result) {
			for i := range out {
				out[i] = limit.Result{Err: c.err}
			}
		})})
		for _, target := range []string{"/v1/check?key=three"} {
			resp := do(t, s, "GET", target, "")
			var e errorBody
			decode(t, resp, &e)
			if resp.StatusCode != c.status || e.Error != c.err.Error() {
				t.Errorf("%v: %s answered %d %q, want %d", c.err, target, resp.StatusCode, e.Error, c.status)
			}
		}
		resp := do(t, s, "POST", "/v1/take", `[{"key":"three"}]`)
		if got := bodyText(t, resp); resp.StatusCode != 200 || !strings.Contains(got, fmt.Sprintf(`"status":%d`, c.status)) {
			t.Errorf("%v: batch answered %d %s", c.err, resp.StatusCode, got)
		}
	}
}

// Every request runs under the limiter's deadline: a store that never
// answers costs one timeout, then the policy's fallback decides.
func TestCheckNeverHangs(t *testing.T) {
	t.Parallel()
	// A real limiter whose store waits for its context: the deadline the
	// limiter sets is the only thing that can end the call.
	l := newLimiterWith(t, blockingStore{}, 20*time.Millisecond)
	s := newServer(t, Config{Decider: l})
	done := make(chan *http.Response, 1)
	go func() { done <- do(t, s, "GET", "/v1/check?key=three:hang", "") }()
	select {
	case resp := <-done:
		var r resultBody
		decode(t, resp, &r)
		if resp.StatusCode != 429 || r.DecidedBy != limit.ByFallbackClosed || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("a store that never answers: %d %+v Retry-After %q, want 429 by fallback-closed, Retry-After 1", resp.StatusCode, r, resp.Header.Get("Retry-After"))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s: the request hangs")
	}
}

func TestBearerAuth(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{RequirePass: "s3cret pass"})
	cases := []struct {
		auth      []string
		status    int
		challenge string
	}{
		{nil, 401, `Bearer realm="sluice"`},
		{[]string{"Authorization", "Bearer wrong"}, 401, `Bearer realm="sluice", error="invalid_token"`},
		{[]string{"Authorization", "Basic czNjcmV0IHBhc3M="}, 401, `Bearer realm="sluice", error="invalid_token"`},
		{[]string{"Authorization", "Bearer s3cret pass"}, 200, ""},
		{[]string{"Authorization", "bearer s3cret pass"}, 200, ""},
		{[]string{"Authorization", "Bearer s3cret pas"}, 401, `Bearer realm="sluice", error="invalid_token"`},
	}
	for _, c := range cases {
		for _, target := range []string{"/v1/check?key=win:auth", "/nowhere"} {
			resp := do(t, s, "GET", target, "", c.auth...)
			status := c.status
			if status == 200 && target == "/nowhere" {
				status = 404
			}
			if resp.StatusCode != status || resp.Header.Get("WWW-Authenticate") != c.challenge {
				t.Errorf("%v %s: %d %q, want %d %q", c.auth, target, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), status, c.challenge)
			}
			if strings.Contains(bodyText(t, resp), "s3cret") {
				t.Errorf("%v: the password is in the body", c.auth)
			}
		}
	}
	resp := do(t, s, "POST", "/v1/take", `{"key":"three:auth"}`)
	if resp.StatusCode != 401 {
		t.Errorf("take without a token: %d", resp.StatusCode)
	}
}
