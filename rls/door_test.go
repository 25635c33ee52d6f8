package rls_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/envoycfg"
	"github.com/sluice-rl/sluice/hotkey"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/rls"
)

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

// doorPolicies are sluice's own policies over descriptor keys.
const doorPolicies = `defaults: {on_store_error: closed}
policies:
  - {name: per-ip, match: "edge:remote_address=*", algorithm: fixed_window, limit: 3, period: 1h}
  - {name: per-path, match: "edge:path=*", limit: 5, rate: 5, period: 1h}
  - {name: dark, match: "edge:dark=*", limit: 1, rate: 1, period: 1h, shadow: true}
  - {name: down-open, match: "down:open=*", limit: 1, rate: 1, period: 1h, on_store_error: open}
  - {name: down-closed, match: "down:closed=*", limit: 1, rate: 1, period: 1h, on_store_error: closed}
  - {name: hot, match: "edge:hot=*", limit: 100000, rate: 100000, period: 1h, hot: {mode: lease, threshold: 5}}
`

// newLimiter is the real limiter over a real cluster with doorPolicies.
func newLimiter(t *testing.T, c *localredis.Cluster) *limiter.Limiter {
	t.Helper()
	set, err := policy.Parse([]byte(doorPolicies), "door.yaml")
	if err != nil {
		t.Fatal(err)
	}
	store, err := cluster.New(cluster.Config{Addrs: c.Addrs(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	timeout := func() time.Duration { return 2 * time.Second }
	hot, err := hotkey.New(hotkey.Config{Store: store, LeaseTTL: time.Hour, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hot.Close(context.Background()) })
	lim, err := limiter.New(limiter.Config{Policies: set, Store: store, Timeout: timeout, Hot: hot})
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// vipMatcher is sluice's policies, with "vip" values unlimited.
type vipMatcher struct{ rls.Matcher }

func (m vipMatcher) Match(domain string, es []envoycfg.Entry) (*limit.Policy, bool) {
	if len(es) == 1 && es[0].Value == "vip" {
		return nil, true
	}
	return m.Matcher.Match(domain, es)
}

// startDoor serves cfg (Decider lim unless set, Matcher sluice's policies
// unless set) on a loopback port and returns a client of it.
func startDoor(t testing.TB, lim *limiter.Limiter, cfg rls.Config) rlsv3.RateLimitServiceClient {
	t.Helper()
	if cfg.Decider == nil {
		cfg.Decider = lim
	}
	_, addr := serveDoor(t, cfg)
	return rlsv3.NewRateLimitServiceClient(dialDoor(t, addr))
}

// serveDoor serves cfg (Matcher sluice's policies unless set) on a
// loopback port until the test ends, and returns it and its address.
func serveDoor(t testing.TB, cfg rls.Config) (*rls.Server, string) {
	t.Helper()
	if cfg.Matcher == nil {
		set, _ := policy.Parse([]byte(doorPolicies), "door.yaml")
		cfg.Matcher = vipMatcher{rls.PolicyMatcher(set.Match)}
	}
	srv, err := rls.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-errc; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv, ln.Addr().String()
}

// dialDoor is a plaintext client connection to addr, closed when the test ends.
func dialDoor(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func hits(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func req(domain string, hitsAddend uint32, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, HitsAddend: hitsAddend, Descriptors: ds}
}

// call sends r and fails the test on an error.
func call(t *testing.T, c rlsv3.RateLimitServiceClient, r *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, r)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v): %v", r, err)
	}
	if len(resp.Statuses) != len(r.Descriptors) {
		t.Fatalf("%d statuses for %d descriptors: %v", len(resp.Statuses), len(r.Descriptors), resp)
	}
	return resp
}

// want is one descriptor's expected code and limit_remaining.
type want struct {
	code rlsv3.RateLimitResponse_Code
	left uint32
}

func check(t *testing.T, what string, resp *rlsv3.RateLimitResponse, overall rlsv3.RateLimitResponse_Code, ws ...want) {
	t.Helper()
	var got []want
	for _, s := range resp.Statuses {
		got = append(got, want{s.Code, s.LimitRemaining})
	}
	bad := resp.OverallCode != overall || len(got) != len(ws)
	for i := range ws {
		bad = bad || got[i] != ws[i]
	}
	if bad {
		t.Errorf("%s: overall %s, statuses %v; want overall %s, statuses %v", what, resp.OverallCode, got, overall, ws)
	}
}

func TestDoorOnCluster(t *testing.T) {
	c := redistest.NewCluster(t, localredis.Config{Replicas: -1})
	lim := newLimiter(t, c)
	door := startDoor(t, lim, rls.Config{})
	uniq := func(s string) string { return s + "-" + strings.ReplaceAll(t.Name(), "/", ".") }

	t.Run("matching", func(t *testing.T) {
		ip := uniq("10.0.0.1")
		resp := call(t, door, req("edge", 0, desc("remote_address", ip), desc("nobody", "x"), desc("remote_address", "vip")))
		check(t, "first", resp, ok, want{ok, 2}, want{ok, 0}, want{ok, 1<<32 - 1})
		s := resp.Statuses[0]
		if cl := s.CurrentLimit; cl.GetName() != "per-ip" || cl.GetRequestsPerUnit() != 3 || cl.GetUnit() != rlsv3.RateLimitResponse_RateLimit_HOUR || cl.GetUnitMultiplier() != nil {
			t.Errorf("current_limit %v, want per-ip: 3 per HOUR", cl)
		}
		if d := s.DurationUntilReset.AsDuration(); d <= 0 || d > time.Hour {
			t.Errorf("duration_until_reset %v, want in (0, 1h]", d)
		}
		if resp.Statuses[1].CurrentLimit != nil || resp.Statuses[2].CurrentLimit != nil {
			t.Errorf("unmatched and unlimited descriptors have a current_limit: %v", resp.Statuses)
		}
		// Another domain is another key: its own bucket.
		check(t, "other domain", call(t, door, req("edge2", 0, desc("remote_address", ip))), ok, want{ok, 0})
		call(t, door, req("edge", 0, desc("remote_address", ip)))
		call(t, door, req("edge", 0, desc("remote_address", ip)))
		check(t, "fourth", call(t, door, req("edge", 0, desc("remote_address", ip))), over, want{over, 0})
	})

	t.Run("hits_addend", func(t *testing.T) {
		path := uniq("/p")
		check(t, "request 2", call(t, door, req("edge", 2, desc("path", path))), ok, want{ok, 3})
		check(t, "descriptor 1 over request 5", call(t, door, req("edge", 5, hits(desc("path", path), 1))), ok, want{ok, 2})
		check(t, "descriptor 0 checks only", call(t, door, req("edge", 0, hits(desc("path", path), 0))), ok, want{ok, 2})
		check(t, "request 3 refused", call(t, door, req("edge", 3, desc("path", path))), over, want{over, 2})
		check(t, "request 2 admitted", call(t, door, req("edge", 2, desc("path", path))), ok, want{ok, 0})
		check(t, "descriptor 0 over", call(t, door, req("edge", 0, hits(desc("path", path), 0))), over, want{over, 0})
	})

	t.Run("shadow", func(t *testing.T) {
		d := uniq("d")
		check(t, "first", call(t, door, req("edge", 0, desc("dark", d))), ok, want{ok, 0})
		check(t, "second, over in truth", call(t, door, req("edge", 0, desc("dark", d))), ok, want{ok, 0})
	})

	t.Run("all-or-nothing", func(t *testing.T) {
		ip, path := uniq("10.0.0.2"), uniq("/q")
		check(t, "path to 1", call(t, door, req("edge", 4, desc("path", path))), ok, want{ok, 1})
		resp := call(t, door, req("edge", 2, desc("remote_address", ip), desc("path", path)))
		check(t, "ip allows 2, path refuses", resp, over, want{ok, 3}, want{over, 1})
		// Nothing was spent on ip: all three of its tokens are there.
		check(t, "ip 3", call(t, door, req("edge", 3, desc("remote_address", ip))), ok, want{ok, 0})
		// A check-only descriptor over its limit takes nothing from the others.
		path2 := uniq("/r")
		resp = call(t, door, req("edge", 1, desc("path", path2), hits(desc("remote_address", ip), 0)))
		check(t, "peek over", resp, over, want{ok, 5}, want{over, 0}) // peeked: 5 left, none spent
		check(t, "path2 untouched", call(t, door, req("edge", 5, desc("path", path2))), ok, want{ok, 0})
	})

	// A request with one limited descriptor goes RL.TAKE's way, hot-key
	// paths included (MTake has none); several go RL.MTAKE's.
	t.Run("one rule is a take", func(t *testing.T) {
		before := lim.Snapshot()
		key := uniq("k")
		leased := int64(0)
		for i := 0; i < 2000 && leased == 0; i++ { // past 5/s on any machine
			call(t, door, req("edge", 0, desc("hot", key), desc("nobody", "x")))
			leased = lim.Snapshot().ByPath[limit.ByLease] - before.ByPath[limit.ByLease]
		}
		if leased == 0 {
			t.Errorf("2000 calls of one hot descriptor, none decided by lease")
		}
		if got := lim.Snapshot().MTakes - before.MTakes; got != 0 {
			t.Errorf("%d MTakes for requests of one limited descriptor, want 0", got)
		}
		call(t, door, req("edge", 0, desc("hot", key), desc("path", key)))
		if got := lim.Snapshot().MTakes - before.MTakes; got != 1 {
			t.Errorf("%d MTakes after a request of two limited descriptors, want 1", got)
		}
	})

	t.Run("headers", func(t *testing.T) {
		hdoor := startDoor(t, lim, rls.Config{Headers: true})
		resp := call(t, hdoor, req("edge", 0, desc("path", uniq("/h")), desc("remote_address", uniq("10.0.0.3"))))
		got := map[string]string{}
		for _, h := range resp.ResponseHeadersToAdd {
			got[h.Key] = h.Value
		}
		if got["RateLimit-Policy"] != `"per-ip";q=3;w=3600` || !strings.HasPrefix(got["RateLimit"], `"per-ip";r=2;t=`) {
			t.Errorf("headers %v, want the per-ip rule's (2 left of 3)", got)
		}
		if plain := call(t, door, req("edge", 0, desc("path", uniq("/h")))); len(plain.ResponseHeadersToAdd) != 0 {
			t.Errorf("headers without Config.Headers: %v", plain.ResponseHeadersToAdd)
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		tests := []struct {
			name string
			r    *rlsv3.RateLimitRequest
			code codes.Code
			msg  string
		}{
			{"no domain", req("", 0, desc("k", "v")), codes.InvalidArgument, "rate limit domain must not be empty"},
			{"no descriptors", req("edge", 0), codes.InvalidArgument, "rate limit descriptor list must not be empty"},
			{"empty key", req("edge", 0, desc("", "v")), codes.InvalidArgument, "descriptor 0, entry 0: key must not be empty"},
			{"huge key", req("edge", 0, desc("k", strings.Repeat("v", 2000))), codes.InvalidArgument, "descriptor 0: its key is longer than the 1024 bytes allowed"},
			{"too large a message", req("edge", 0, desc("k", strings.Repeat("v", 200<<10))), codes.ResourceExhausted, "grpc: received message larger than max"},
		}
		for _, tt := range tests {
			_, err := door.ShouldRateLimit(t.Context(), tt.r)
			if st, _ := status.FromError(err); st.Code() != tt.code || !strings.HasPrefix(st.Message(), tt.msg) {
				t.Errorf("%s: %v, want %s %q", tt.name, err, tt.code, tt.msg)
			}
		}
		// The door still serves.
		call(t, door, req("edge", 0, desc("k", "v")))
	})

	t.Run("a panic is Internal", func(t *testing.T) {
		pdoor := startDoor(t, lim, rls.Config{Matcher: panicMatcher{}})
		_, err := pdoor.ShouldRateLimit(t.Context(), req("edge", 0, desc("k", "v")))
		if status.Code(err) != codes.Internal {
			t.Errorf("got %v, want Internal", err)
		}
		_, err = pdoor.ShouldRateLimit(t.Context(), req("edge", 0, desc("k", "v")))
		if status.Code(err) != codes.Internal {
			t.Errorf("second call: %v, want Internal again (the server lives)", err)
		}
	})

	t.Run("auth", func(t *testing.T) {
		adoor := startDoor(t, lim, rls.Config{RequirePass: "s3cret"})
		r := req("edge", 0, desc("path", uniq("/a")))
		for _, md := range [][]string{nil, {"authorization", "Bearer wrong"}, {"authorization", "s3cret"}, {"authorization", "Basic s3cret"}} {
			ctx := metadata.AppendToOutgoingContext(t.Context(), md...)
			if _, err := adoor.ShouldRateLimit(ctx, r); status.Code(err) != codes.Unauthenticated {
				t.Errorf("metadata %q: %v, want Unauthenticated", md, err)
			}
		}
		ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer s3cret")
		resp, err := adoor.ShouldRateLimit(ctx, r)
		if err != nil || resp.OverallCode != ok {
			t.Errorf("with the token: %v, %v; want OK", resp, err)
		}
	})

	// Last: the cluster goes away. Each rule follows its on_store_error.
	t.Run("store down", func(t *testing.T) {
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
		check(t, "open", call(t, door, req("down", 0, desc("open", "x"))), ok, want{ok, 1})
		check(t, "closed", call(t, door, req("down", 0, desc("closed", "x"))), over, want{over, 0})
		check(t, "both", call(t, door, req("down", 0, desc("open", "y"), desc("closed", "y"))), over, want{ok, 1}, want{over, 0})
	})
}

type panicMatcher struct{}

func (panicMatcher) Match(string, []envoycfg.Entry) (*limit.Policy, bool) { panic("boom") }
