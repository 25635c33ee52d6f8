package rls_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/envoycfg"
	"github.com/sluice-rl/sluice/internal/acl"
)

// doorUsers: acme may take (and peek) its own domain's descriptors; peeker
// may only read its keys, so it may check (hits_addend 0) but not take;
// slotter has no @limit at all; "default" is off.
const doorUsers = `
user acme on >secret ~acme:* +@limit
user peeker on >pk %R~acme:* +@limit
user slotter on >sl ~* +@slot
`

func parseUsers(t *testing.T, text string) *acl.Holder {
	t.Helper()
	l, err := acl.Parse("door.acl", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return acl.NewHolder(l)
}

// withAuth is a context for one call with the metadata authorization: v.
func withAuth(t *testing.T, v string) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	t.Cleanup(cancel)
	if v == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", v)
}

// Every call authenticates as a user and every descriptor's key is checked
// against that user's patterns before anything is decided: one descriptor
// outside them refuses the call whole with PermissionDenied, and the
// Decider is never asked.
func TestDoorUsers(t *testing.T) {
	var decided atomic.Int64
	cfg := countingDoor(&decided)
	users := parseUsers(t, doorUsers)
	cfg.Users = users
	_, addr := serveDoor(t, cfg)
	client := rlsv3.NewRateLimitServiceClient(dialDoor(t, addr))
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("acme:secret"))
	cases := []struct {
		name, auth string
		r          *rlsv3.RateLimitRequest
		code       codes.Code
		msg        string // the status message, "" for OK
		decides    bool   // whether the Decider is asked
	}{
		{"no credentials", "", req("acme", 0, desc("path", "/a")), codes.Unauthenticated,
			"authentication required: metadata authorization: Basic user:password, or Bearer user:password or the default password", false},
		{"wrong password", "Bearer acme:nope", req("acme", 0, desc("path", "/a")), codes.Unauthenticated,
			"authentication required: metadata authorization: Basic user:password, or Bearer user:password or the default password", false},
		{"bearer user:pass", "Bearer acme:secret", req("acme", 0, desc("path", "/a")), codes.OK, "", true},
		{"basic", basic, req("acme", 0, desc("path", "/a"), desc("user", "u")), codes.OK, "", true},
		{"another domain", "Bearer acme:secret", req("beta", 0, desc("path", "/a")), codes.PermissionDenied,
			"NOPERM No permissions to access a key", false},
		{"read-only user checks", "Bearer peeker:pk", req("acme", 0, hits(desc("path", "/a"), 0)), codes.OK, "", true},
		{"read-only user takes", "Bearer peeker:pk", req("acme", 0, hits(desc("path", "/a"), 0), desc("path", "/b")), codes.PermissionDenied,
			"NOPERM No permissions to access a key", false},
		{"no @limit", "Bearer slotter:sl", req("acme", 0, desc("path", "/a")), codes.PermissionDenied,
			"NOPERM User slotter has no permissions to run the 'rl.take' command", false},
	}
	for _, c := range cases {
		before := decided.Load()
		_, err := client.ShouldRateLimit(withAuth(t, c.auth), c.r)
		st, _ := status.FromError(err)
		if st.Code() != c.code || st.Message() != c.msg {
			t.Errorf("%s: %s %q, want %s %q", c.name, st.Code(), st.Message(), c.code, c.msg)
		}
		if asked := decided.Load() > before; asked != c.decides {
			t.Errorf("%s: the Decider asked %v, want %v", c.name, asked, c.decides)
		}
	}

	// The descriptors of one request share its domain, so a foreign one
	// is foreign to patterns that name entries. After a reload acme may
	// take acme:path=/a* only: a request with /a and /b is refused whole,
	// though /a alone is admitted.
	before := decided.Load()
	narrow := parseUsers(t, "user acme on >secret ~acme:path=/a* +@limit\n")
	users.Store(narrow.Users())
	_, err := client.ShouldRateLimit(withAuth(t, "Bearer acme:secret"), req("acme", 0, desc("path", "/a"), desc("path", "/b")))
	if status.Code(err) != codes.PermissionDenied || decided.Load() != before {
		t.Errorf("a request with one descriptor outside the patterns: %v, decided %d times; want PermissionDenied and none", err, decided.Load()-before)
	}
	if _, err := client.ShouldRateLimit(withAuth(t, "Bearer acme:secret"), req("acme", 0, desc("path", "/a"))); err != nil {
		t.Errorf("after the reload, acme's own descriptor: %v", err)
	}
	if _, err := client.ShouldRateLimit(withAuth(t, "Bearer peeker:pk"), req("acme", 0, hits(desc("path", "/a"), 0))); status.Code(err) != codes.Unauthenticated {
		t.Errorf("after the reload deleted peeker: %v, want Unauthenticated", err)
	}

	var got []string
	for _, e := range users.Log().Entries(-1) {
		got = append(got, fmt.Sprintf("%s %s %s %s", e.Reason, e.Context, e.Object, e.Username))
	}
	want := []string{ // newest first
		"auth grpc AUTH default", // peeker is no user any more: its name could be part of a bare password
		"key grpc acme:path=/b acme",
		"command grpc rl.take slotter",
		"key grpc acme:path=/b peeker",
		"key grpc beta:path=/a acme",
		"auth grpc AUTH acme",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ACL LOG:\n got %q\nwant %q", got, want)
	}
}

// A share_threshold rule counts every matching value on one counter: a
// user must be allowed both the key its descriptor names and that counter.
func TestDoorUsersSharedCounter(t *testing.T) {
	var decided atomic.Int64
	cfg := countingDoor(&decided)
	ec, err := envoycfg.Parse("shared.yaml", []byte("domain: acme\ndescriptors:\n  - key: path\n    value: '/api/*'\n    share_threshold: true\n    rate_limit: {unit: hour, requests_per_unit: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Matcher = envoycfg.NewHolder(ec)
	cfg.Users = parseUsers(t, "user owner on >pw ~acme:* +@limit\nuser narrow on >pw ~acme:path=/api/x +@limit\nuser counter on >pw ~acme:path=/api/[*] +@limit\n")
	_, addr := serveDoor(t, cfg)
	client := rlsv3.NewRateLimitServiceClient(dialDoor(t, addr))
	r := req("acme", 0, desc("path", "/api/x"))
	if _, err := client.ShouldRateLimit(withAuth(t, "Bearer owner:pw"), r); err != nil {
		t.Errorf("the owner of acme:*: %v", err)
	}
	for _, who := range []string{"narrow", "counter"} { // allowed only the key named, only the counter
		before := decided.Load()
		_, err = client.ShouldRateLimit(withAuth(t, "Bearer "+who+":pw"), r)
		if st, _ := status.FromError(err); st.Code() != codes.PermissionDenied || decided.Load() != before {
			t.Errorf("%s, allowed one of acme:path=/api/x and its shared counter acme:path=/api/*: %v, decided %d; want PermissionDenied, none", who, err, decided.Load()-before)
		}
	}
}

// --requirepass alone is the default user, with its bare token as before,
// and Bearer default:<password> too; without any password every call is
// served whatever it carries.
func TestDoorRequirePassIsTheDefaultUser(t *testing.T) {
	var decided atomic.Int64
	cfg := countingDoor(&decided)
	cfg.RequirePass = "s3cret"
	_, addr := serveDoor(t, cfg)
	client := rlsv3.NewRateLimitServiceClient(dialDoor(t, addr))
	for _, c := range []struct {
		auth string
		code codes.Code
	}{
		{"Bearer s3cret", codes.OK},
		{"bearer s3cret ", codes.OK},
		{"Bearer default:s3cret", codes.OK},
		{"Basic " + base64.StdEncoding.EncodeToString([]byte(":s3cret")), codes.OK},
		{"Bearer wrong", codes.Unauthenticated},
		{"", codes.Unauthenticated},
	} {
		_, err := client.ShouldRateLimit(withAuth(t, c.auth), req("edge", 0, desc("k", "v")))
		if status.Code(err) != c.code {
			t.Errorf("%q: %v, want %s", c.auth, err, c.code)
		}
	}
	open := countingDoor(&decided)
	_, addr = serveDoor(t, open)
	client = rlsv3.NewRateLimitServiceClient(dialDoor(t, addr))
	for _, auth := range []string{"", "Bearer anything", "Bearer acme:x", "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:app")), "Basic !!"} {
		if _, err := client.ShouldRateLimit(withAuth(t, auth), req("edge", 0, desc("k", "v"))); err != nil {
			t.Errorf("no password, %q: %v", auth, err)
		}
	}
}

// With Users that need credentials, a connection that has not
// authenticated within AuthTimeout is closed, as with RequirePass; a call
// that authenticates keeps its connection.
func TestDoorUsersAuthTimeout(t *testing.T) {
	var decided atomic.Int64
	cfg := countingDoor(&decided)
	cfg.Users = parseUsers(t, doorUsers)
	cfg.AuthTimeout = 50 * time.Millisecond
	srv, addr := serveDoor(t, cfg)
	good := newDialer()
	client := rlsv3.NewRateLimitServiceClient(dialDoor(t, addr, good.option()))
	if _, err := client.ShouldRateLimit(withAuth(t, "Bearer acme:secret"), req("acme", 0, desc("path", "/a"))); err != nil {
		t.Fatal(err)
	}
	goodConn := good.next(t)
	d := newDialer()
	dialDoor(t, addr, d.option()).Connect()
	waitGone(t, d.next(t), "a connection that makes no call")
	if !isOpen(goodConn) || srv.AuthTimeouts() != 1 {
		t.Errorf("the authenticated connection open %v, AuthTimeouts %d; want true and 1", isOpen(goodConn), srv.AuthTimeouts())
	}
}
