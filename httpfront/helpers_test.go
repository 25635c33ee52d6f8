package httpfront

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/local"
)

// t0 is the frozen clock of the in-process store: every figure below is exact.
var t0 = time.Unix(1_700_000_000, 0)

// testPolicies: "three" holds 3 tokens refilled at 1/s; "win" counts 5 per
// 1m window; "dark" is a shadow policy; keys starting "none" match nothing.
var testPolicies = []*limit.Policy{
	{Name: "three", Match: "three*", Limit: 3, Rate: 1, Period: time.Second, OnStoreError: limit.FailClosed},
	{Name: "win", Match: "win*", Algorithm: limit.FixedWindow, Limit: 5, Period: time.Minute, OnStoreError: limit.FailClosed},
	{Name: "dark", Match: "dark*", Limit: 1, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed, Shadow: true},
	{Name: `we"ird\näme`, Match: "weird*", Limit: 2, Rate: 1, Period: time.Minute, OnStoreError: limit.FailClosed},
}

func matchPolicy(key string) *limit.Policy {
	for _, p := range testPolicies {
		if strings.HasPrefix(key, strings.TrimSuffix(p.Match, "*")) {
			return p
		}
	}
	return nil
}

// newLimiter is the real limiter over the in-process store, on a frozen clock.
func newLimiter(t testing.TB) *limiter.Limiter {
	t.Helper()
	store := local.New(local.Config{Now: func() time.Time { return t0 }})
	l, err := limiter.New(limiter.Config{Policies: limiter.MatcherFunc(matchPolicy), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// newServer is a Server over a fresh limiter, cfg's Decider filled in when unset.
func newServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Decider == nil {
		cfg.Decider = newLimiter(t)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// deciderFunc is a Decider made of a function: only for the errors the
// limiter cannot be made to return for real here (ErrUnavailable never
// leaves it; an error reply of Redis needs a Redis, see cmd/sluice).
type deciderFunc func(ctx context.Context, reqs []limit.Request, out []limit.Result)

func (f deciderFunc) Decide(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	f(ctx, reqs, out)
}

// do runs one request through the handler.
func do(t testing.TB, s http.Handler, method, target, body string, header ...string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec.Result()
}

// decode reads a JSON body into v, failing the test on bad JSON.
func decode(t testing.TB, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("body %q: %v", b, err)
	}
}

func bodyText(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// newLimiterWith is the real limiter over store with the given deadline.
func newLimiterWith(t testing.TB, store limit.Store, timeout time.Duration) *limiter.Limiter {
	t.Helper()
	l, err := limiter.New(limiter.Config{Policies: limiter.MatcherFunc(matchPolicy), Store: store,
		Timeout: func() time.Duration { return timeout }})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// blockingStore never answers before its context ends, as a paused Redis
// node; the e2e test in cmd/sluice pauses a real one.
type blockingStore struct{}

func (blockingStore) Do(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	<-ctx.Done()
	for i := range out {
		out[i] = limit.Result{Err: &limit.UnavailableError{Node: "paused", Err: ctx.Err()}}
	}
}

func (blockingStore) Reset(ctx context.Context, _ string, _ *limit.Policy) (bool, error) {
	<-ctx.Done()
	return false, ctx.Err()
}

func (blockingStore) Close() error { return nil }
