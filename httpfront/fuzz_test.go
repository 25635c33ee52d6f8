package httpfront

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/limit"
)

// FuzzHTTPHandler drives the handler with arbitrary methods, paths,
// queries, headers and bodies, over the real limiter on the in-process
// store and over a Decider that answers errors. It must never panic, every
// status must be one docs/http.md lists, every body must be JSON, and every
// decision must carry its RateLimit headers.
func FuzzHTTPHandler(f *testing.F) {
	seeds := []struct{ method, target, header, body string }{
		{"GET", "/v1/check?key=three:a", "", ""},
		{"POST", "/v1/check?key=three:a&cost=2&legacy=1", "", "ignored"},
		{"HEAD", "/v1/check", "X-RateLimit-Key: win:x", ""},
		{"POST", "/v1/take", "Content-Type: application/json", `{"key":"three:b","cost":3}`},
		{"POST", "/v1/take", "", `[{"key":"three:b"},{"key":"none"},{"key":"dark:z","cost":9}]`},
		{"POST", "/v1/take", "", `{"key":"three","cost":1e400}`},
		{"POST", "/v1/take", "", `[[[[[[[[[[`},
		{"GET", "/v1/check?key=%ff%00&cost=00", "Authorization: Bearer x", ""},
		{"PATCH", "/v1/take?x", "X-RateLimit-Key: a\nX-RateLimit-Key: b", "{}"},
		{"GET", "/v1/check?key=weird&legacy=true", "", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.target, s.header, []byte(s.body), false)
	}
	lim := newLimiter(f)
	failing := deciderFunc(func(_ context.Context, reqs []limit.Request, out []limit.Result) {
		for i := range out {
			out[i] = limit.Result{Err: &limit.UnavailableError{Err: context.DeadlineExceeded}}
		}
	})
	servers := map[bool]*Server{}
	for _, withErrors := range []bool{false, true} {
		cfg := Config{Decider: lim, MaxBodyBytes: 4096, MaxKeyBytes: 64, MaxBatch: 8}
		if withErrors {
			cfg.Decider = failing
			cfg.RequirePass = "pw"
		}
		s, err := New(cfg)
		if err != nil {
			f.Fatal(err)
		}
		servers[withErrors] = s
	}
	allowed := map[int]bool{200: true, 400: true, 401: true, 404: true, 405: true, 413: true, 429: true, 500: true, 503: true}
	f.Fuzz(func(t *testing.T, method, target, header string, body []byte, withErrors bool) {
		raw := method + " " + target + " HTTP/1.1\r\nHost: x\r\n"
		for _, line := range strings.Split(header, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				raw += line + "\r\n"
			}
		}
		if withErrors {
			raw += "Authorization: Bearer pw\r\n"
		}
		raw += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + string(body)
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return // net/http refuses it before any handler runs
		}
		rec := httptest.NewRecorder()
		servers[withErrors].ServeHTTP(rec, req)
		if !allowed[rec.Code] {
			t.Fatalf("%q: status %d", raw, rec.Code)
		}
		if req.Method != http.MethodHead && !json.Valid(bytes.TrimSpace(rec.Body.Bytes())) {
			t.Fatalf("%q: body is not JSON: %q", raw, rec.Body.String())
		}
		if rec.Code == 200 && req.URL.Path == "/v1/check" || rec.Code == 429 {
			if rec.Header().Get("RateLimit") == "" || rec.Header().Get("RateLimit-Policy") == "" {
				t.Fatalf("%q: decision %d without RateLimit headers: %v", raw, rec.Code, rec.Header())
			}
		}
	})
}
