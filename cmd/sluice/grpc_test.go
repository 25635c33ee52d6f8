package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

var grpcListenRE = regexp.MustCompile(`msg="grpc listening" addr=(\S+)`)

// grpcAddr is the address the process's --grpc listens on, from its log
// (written before "sluice listening", which startSluice waited for).
func grpcAddr(t *testing.T, p *proc) string {
	t.Helper()
	m := grpcListenRE.FindStringSubmatch(p.Logs())
	if m == nil {
		t.Fatalf("no \"grpc listening\" line in the log:\n%s", p.Logs())
	}
	return m[1]
}

// rlsClient dials addr with creds (nil: plaintext).
func rlsClient(t *testing.T, addr string, creds credentials.TransportCredentials) rlsv3.RateLimitServiceClient {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

func rlsRequest(domain string, hitsAddend uint32, kvs ...[]string) *rlsv3.RateLimitRequest {
	r := &rlsv3.RateLimitRequest{Domain: domain, HitsAddend: hitsAddend}
	for _, kv := range kvs {
		d := &ratelimitv3.RateLimitDescriptor{}
		for i := 0; i+1 < len(kv); i += 2 {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
		}
		r.Descriptors = append(r.Descriptors, d)
	}
	return r
}

// codes of a response: overall, then each descriptor's code and remaining.
func rlsCodes(r *rlsv3.RateLimitResponse) string {
	var b strings.Builder
	b.WriteString(r.OverallCode.String())
	for _, s := range r.Statuses {
		b.WriteString(" " + s.Code.String() + "/" + strconv.FormatUint(uint64(s.LimitRemaining), 10))
	}
	return b.String()
}

const grpcConfig = `defaults: {on_store_error: closed}
policies:
  - {name: per-ip, match: "edge:remote_address=*", algorithm: fixed_window, limit: 3, period: 1h}
  - {name: per-path, match: "edge:path=*", limit: 5, rate: 5, period: 1h}
  - {name: dark, match: "edge:dark=*", limit: 1, rate: 1, period: 1h, shadow: true}
  - {name: down-open, match: "down:open=*", limit: 1, rate: 1, period: 1h, on_store_error: open}
  - {name: down-closed, match: "down:closed=*", limit: 1, rate: 1, period: 1h}
`

// The binary's --grpc door on a real cluster: Envoy's requests are decided
// by the same limiter and buckets as RESP, with the RESP password as a
// bearer token, and a store that goes away follows each rule's
// on_store_error; SIGTERM stops the door with the rest.
func TestGRPCDoorBinary(t *testing.T) {
	c := redistest.NewCluster(t, localredis.Config{Replicas: -1})
	p := startSluice(t, "--cluster", strings.Join(c.Addrs(), ","), "--config", writeConfig(t, grpcConfig),
		"--grpc", "127.0.0.1:0", "--requirepass", "s3cret", "--timeout", "500ms")
	door := rlsClient(t, grpcAddr(t, p), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if _, err := door.ShouldRateLimit(ctx, rlsRequest("edge", 0, []string{"path", "/x"})); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: %v, want Unauthenticated", err)
	}
	actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret")
	call := func(r *rlsv3.RateLimitRequest) string {
		t.Helper()
		resp, err := door.ShouldRateLimit(actx, r)
		if err != nil {
			t.Fatalf("ShouldRateLimit(%v): %v", r, err)
		}
		return rlsCodes(resp)
	}
	steps := []struct {
		what string
		r    *rlsv3.RateLimitRequest
		want string
	}{
		{"path to 1 left", rlsRequest("edge", 4, []string{"path", "/x"}), "OK OK/1"},
		{"ip allows, path refuses: nothing spent", rlsRequest("edge", 2, []string{"remote_address", "10.1.1.1"}, []string{"path", "/x"}, []string{"user", "u"}), "OVER_LIMIT OK/3 OVER_LIMIT/1 OK/0"},
		{"ip still has 3", rlsRequest("edge", 3, []string{"remote_address", "10.1.1.1"}), "OK OK/0"},
		{"shadow over, OK", rlsRequest("edge", 2, []string{"dark", "d"}), "OK OK/1"},
	}
	for _, s := range steps {
		if got := call(s.r); got != s.want {
			t.Errorf("%s: %s, want %s", s.what, got, s.want)
		}
	}
	// The same bucket through RESP: the door's key is edge:path=/x.
	cl := redis.NewClient(&redis.Options{Addr: p.Addr, Password: "s3cret", MaxRetries: -1})
	t.Cleanup(func() { _ = cl.Close() })
	if r := peek(ctx, t, cl, "edge:path=/x"); r.Remaining != 1 {
		t.Errorf("RL.PEEK edge:path=/x over RESP: %+v, want 1 left", r)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := call(rlsRequest("down", 0, []string{"open", "x"}, []string{"closed", "x"})); got != "OVER_LIMIT OK/1 OVER_LIMIT/0" {
		t.Errorf("store down: %s, want open OK, closed OVER_LIMIT", got)
	}
	p.Signal(syscall.SIGTERM)
	if err := p.Wait(20 * time.Second); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
	if !strings.Contains(p.Logs(), `msg=stopped`) {
		t.Errorf("no clean stop in the log:\n%s", p.Logs())
	}
}

// --grpc speaks TLS with --tls-cert-file/--tls-key-file, as --listen does,
// and refuses plaintext.
func TestGRPCDoorTLS(t *testing.T) {
	files := redistest.NewTLSFiles(t)
	p := startSluice(t, "--grpc", "127.0.0.1:0", "--tls-cert-file", files.Cert, "--tls-key-file", files.Key, "--grpc-ratelimit-headers")
	addr := grpcAddr(t, p)
	tc, err := files.ClientConfig(false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := rlsClient(t, addr, credentials.NewTLS(tc)).ShouldRateLimit(ctx, rlsRequest("edge", 0, []string{"k", "v"}))
	if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("over TLS: %v, %v", resp, err)
	}
	if len(resp.ResponseHeadersToAdd) != 2 || resp.ResponseHeadersToAdd[0].Key != "RateLimit-Policy" {
		t.Errorf("--grpc-ratelimit-headers: headers %v, want RateLimit-Policy and RateLimit", resp.ResponseHeadersToAdd)
	}
	if _, err := rlsClient(t, addr, nil).ShouldRateLimit(ctx, rlsRequest("edge", 0, []string{"k", "v"})); status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext to a TLS door: %v, want Unavailable", err)
	}
}
