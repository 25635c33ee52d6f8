package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

var httpAddrRE = regexp.MustCompile(`msg="http listening" addr=(\S+)`)

// startWithHTTP starts sluice with --http on a free port and returns it
// with the HTTP address.
func startWithHTTP(t *testing.T, args ...string) (*proc, string) {
	t.Helper()
	p := startSluice(t, append([]string{"--http", "127.0.0.1:0"}, args...)...)
	m := httpAddrRE.FindStringSubmatch(p.Logs()) // logged before "sluice listening"
	if m == nil {
		t.Fatalf("no http address logged:\n%s", p.Logs())
	}
	return p, m[1]
}

// httpAnswer is one response of the HTTP door, its body decoded.
type httpAnswer struct {
	status  int
	header  http.Header
	body    map[string]any
	items   []map[string]any // a batch answer
	elapsed time.Duration
}

func (a httpAnswer) by() any { return a.body["decided_by"] }

// call sends one request; no answer within the client's 5 s is a failure
// ("never a hang").
func call(t *testing.T, c *http.Client, method, url, body string, header ...string) httpAnswer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := httpAnswer{status: resp.StatusCode, header: resp.Header, elapsed: time.Since(start)}
	if len(b) > 0 && b[0] == '[' {
		err = json.Unmarshal(b, &a.items)
	} else {
		err = json.Unmarshal(b, &a.body)
	}
	if err != nil {
		t.Fatalf("%s %s: body %q: %v", method, url, b, err)
	}
	return a
}

const httpPolicies = `
timeout: 50ms
policies:
  - name: open
    match: "open:*"
    limit: 3
    rate: 1
    period: 1h
    on_store_error: open
    deny_cache: false         # the test watches the store and the failure policy, not the deny cache
    on_overload: open
  - name: closed
    match: "closed:*"
    limit: 3
    rate: 1
    period: 1h
    on_store_error: closed
    deny_cache: false         # the test watches the store and the failure policy, not the deny cache
  - name: other
    match: "other:*"
    limit: 10
    rate: 10
    period: 1s
    on_store_error: closed
    deny_cache: false         # the test watches the store and the failure policy, not the deny cache
`

// The HTTP door on a real cluster: the same limit as RESP, 200 and 429
// with their headers, a batch, an error Redis answered (500), and a store
// that stops answering: closed → 429 from the fallback, open → 200.
func TestHTTPDoorOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{NodeTimeout: 30 * time.Second})
	p, addr := startWithHTTP(t, "--config", writeConfig(t, httpPolicies), "--cluster", strings.Join(c.Addrs(), ","))
	base := "http://" + addr
	hc := &http.Client{Timeout: 5 * time.Second}
	ctx := context.Background()

	a := call(t, hc, "POST", base+"/v1/take", `{"key": "closed:{h}", "cost": 2}`)
	if a.status != 200 || a.body["allowed"] != true || a.body["remaining"] != 1.0 || a.by() != "store" || a.body["limit"] != 3.0 {
		t.Fatalf("take 2 of 3: %d %v", a.status, a.body)
	}
	// RESP and HTTP share one limit.
	if r, err := take(ctx, p.client(t), "closed:{h}", 1); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("RL.TAKE after the HTTP take: %+v %v", r, err)
	}
	a = call(t, hc, "GET", base+"/v1/check?key=closed:{h}&legacy=1", "")
	if a.status != 429 || a.by() != "store" {
		t.Fatalf("check of an empty bucket: %d %v", a.status, a.body)
	}
	for h, want := range map[string]string{
		"RateLimit-Policy":      `"closed";q=3;w=10800`,
		"Retry-After":           "3600",
		"X-RateLimit-Limit":     "3",
		"X-RateLimit-Remaining": "0",
	} {
		if got := a.header.Get(h); got != want {
			t.Errorf("429 %s = %q, want %q", h, got, want)
		}
	}
	if !regexp.MustCompile(`^"closed";r=0;t=\d+$`).MatchString(a.header.Get("RateLimit")) {
		t.Errorf("429 RateLimit = %q", a.header.Get("RateLimit"))
	}
	a = call(t, hc, "GET", base+"/v1/check?key=open:{h}", "")
	if a.status != 200 || a.header.Get("RateLimit") != `"open";r=2;t=3600` || a.header.Get("Retry-After") != "" {
		t.Errorf("check allowed: %d %v", a.status, a.header)
	}
	a = call(t, hc, "POST", base+"/v1/take", `[{"key":"open:{h}"},{"key":"closed:{h}"},{"key":"nomatch"}]`)
	if a.status != 200 || len(a.items) != 3 || a.items[0]["allowed"] != true || a.items[0]["decided_by"] != "store" ||
		a.items[1]["allowed"] != false || a.items[1]["decided_by"] != "store" || a.items[2]["status"] != 404.0 {
		t.Errorf("batch: %d %v", a.status, a.items)
	}

	// A key Redis holds as the wrong type: the script errors, which is a
	// bug to surface (500), never an admit.
	if err := c.ClusterClient().Set(ctx, cluster.Key("other:{h}"), "not a bucket", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	a = call(t, hc, "GET", base+"/v1/check?key=other:{h}", "")
	if a.status != 500 || !strings.Contains(a.body["error"].(string), "WRONGTYPE") {
		t.Errorf("a WRONGTYPE key: %d %v, want 500 naming WRONGTYPE", a.status, a.body)
	}

	// The owner of {h} stops answering (SIGSTOP): each policy's fallback
	// decides, within the 50 ms deadline plus slack, never a hang. Until
	// the breaker opens the store counts as slow rather than dead, and
	// on_overload decides (overload-*): open says on_overload: open.
	fellBack := func(by any, mode string) bool { return by == "fallback-"+mode || by == "overload-"+mode }
	owner, err := c.PrimaryForKey(ctx, cluster.Key("open:{h}"))
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = owner.Resume()
		}
	})
	for range 3 {
		a = call(t, hc, "GET", base+"/v1/check?key=closed:{h}", "")
		if a.status != 429 || !fellBack(a.by(), "closed") || a.header.Get("Retry-After") != "1" || a.header.Get("RateLimit-Policy") != `"closed";q=3;w=10800` {
			t.Errorf("closed, store paused: %d %v %v", a.status, a.body, a.header)
		}
		o := call(t, hc, "GET", base+"/v1/check?key=open:{h}", "")
		if o.status != 200 || !fellBack(o.by(), "open") || o.header.Get("RateLimit") == "" {
			t.Errorf("open, store paused: %d %v %v", o.status, o.body, o.header)
		}
		t.Logf("store paused: closed %d by %v in %v, open %d by %v in %v", a.status, a.by(), a.elapsed.Round(time.Millisecond), o.status, o.by(), o.elapsed.Round(time.Millisecond))
		for _, x := range []httpAnswer{a, o} {
			if x.elapsed > 2*time.Second {
				t.Errorf("an answer with the store paused took %v", x.elapsed)
			}
		}
	}
	a = call(t, hc, "POST", base+"/v1/take", `[{"key":"open:{h}","cost":3},{"key":"closed:{h}"}]`)
	if a.status != 200 || len(a.items) != 2 || a.items[0]["allowed"] != true || !fellBack(a.items[0]["decided_by"], "open") ||
		a.items[1]["allowed"] != false || !fellBack(a.items[1]["decided_by"], "closed") {
		t.Errorf("batch, store paused: %d %v", a.status, a.items)
	}
	if err := owner.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
}

// With --requirepass and the TLS flags the HTTP door wants a bearer token
// over HTTPS; --http-key-header, --max-key-bytes and --max-request-bytes
// apply; SIGTERM stops it cleanly.
func TestHTTPDoorAuthTLSAndLimits(t *testing.T) {
	t.Parallel()
	files := redistest.NewTLSFiles(t)
	p, addr := startWithHTTP(t, "--tls-cert-file", files.Cert, "--tls-key-file", files.Key,
		"--requirepass-file", writeSecret(t, "pass", "http door pass"), "--http-key-header", "X-Client",
		"--max-key-bytes", "8", "--max-request-bytes", "300")
	base := "https://" + addr
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: files.Pool}}}
	bearer := []string{"Authorization", "Bearer http door pass"}

	a := call(t, hc, "GET", base+"/v1/check", "", "X-Client", "k")
	if a.status != 401 || a.header.Get("WWW-Authenticate") != `Bearer realm="sluice"` {
		t.Errorf("no token: %d %v", a.status, a.header)
	}
	a = call(t, hc, "GET", base+"/v1/check", "", "X-Client", "k", "Authorization", "Bearer nope")
	if a.status != 401 || !strings.Contains(a.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("wrong token: %d %v", a.status, a.header)
	}
	a = call(t, hc, "GET", base+"/v1/check", "", append([]string{"X-Client", "k"}, bearer...)...)
	if a.status != 200 || a.by() != "embedded" || a.header.Get("RateLimit-Policy") != `"default";q=100;w=2` {
		t.Errorf("with the token, key from X-Client: %d %v %v", a.status, a.body, a.header)
	}
	a = call(t, hc, "GET", base+"/v1/check?key=123456789", "", bearer...)
	if a.status != 400 || !strings.Contains(a.body["error"].(string), "max 8 bytes") {
		t.Errorf("a 9-byte key over --max-key-bytes 8: %d %v", a.status, a.body)
	}
	a = call(t, hc, "POST", base+"/v1/take", `[`+strings.Repeat(`{"key":"k"},`, 30)+`{"key":"k"}]`, bearer...)
	if a.status != 413 {
		t.Errorf("a body over --max-request-bytes 300: %d %v", a.status, a.body)
	}
	// Plain HTTP to the HTTPS door is refused.
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/v1/check?key=k")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("plain HTTP to the TLS door: %d", resp.StatusCode)
		}
	}

	p.Signal(syscall.SIGTERM)
	if err := p.Wait(10 * time.Second); err != nil {
		t.Fatalf("after SIGTERM: %v\n%s", err, p.Logs())
	}
	if !strings.Contains(p.Logs(), `msg=stopped`) {
		t.Errorf("no clean stop logged:\n%s", p.Logs())
	}
}

// Without --http there is no HTTP door.
func TestHTTPDoorOffByDefault(t *testing.T) {
	t.Parallel()
	p := startSluice(t)
	if strings.Contains(p.Logs(), "http listening") {
		t.Errorf("an HTTP door without --http:\n%s", p.Logs())
	}
}
