package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// The users of the doors' test: acme and beta each own their keys; gw may
// take only acme's /g paths, as an Envoy of one route would; ops is the
// admin who reads ACL LOG.
const (
	doorsAcmePass = "acme-Door-4471xq"
	doorsBetaPass = "beta-Door-8820xq"
	doorsGWPass   = "gw-Door-1093xq"
	doorsOpsPass  = "ops-Door-6618xq"
	doorsUsers    = "user default off\n" +
		"user acme on >" + doorsAcmePass + " ~acme:* +@limit +@adjust\n" +
		"user beta on >" + doorsBetaPass + " ~beta:* +@limit\n" +
		"user gw on >" + doorsGWPass + " ~acme:path=/g* +@limit\n" +
		"user ops on >" + doorsOpsPass + " ~* +@all\n"
	doorsPolicy = "policies:\n  - {name: api, match: \"*\", limit: 5, rate: 5, period: 1h, on_store_error: closed}\n"
)

// curlAnswer is one response as curl printed it.
type curlAnswer struct {
	status    int
	challenge string // WWW-Authenticate, the first
	body      any
}

func (a curlAnswer) String() string {
	b, _ := json.Marshal(a.body)
	return fmt.Sprintf("%d %s", a.status, b)
}

// field is a JSON field of an object answer, as text ("" when absent).
func (a curlAnswer) field(name string) string {
	m, _ := a.body.(map[string]any)
	if v, ok := m[name]; ok {
		return fmt.Sprint(v)
	}
	return ""
}

// curlDoor runs curl with args against the HTTP door and parses what it
// printed (-i: the status line, the headers, the body).
func curlDoor(t *testing.T, curl string, args ...string) curlAnswer {
	t.Helper()
	out, err := exec.Command(curl, append([]string{"-s", "-S", "-i", "--max-time", "10"}, args...)...).Output()
	if err != nil {
		t.Fatalf("curl %v: %v", args, err)
	}
	head, body, _ := strings.Cut(string(out), "\r\n\r\n")
	var a curlAnswer
	for i, line := range strings.Split(head, "\r\n") {
		if i == 0 {
			_, _ = fmt.Sscanf(line, "HTTP/1.1 %d", &a.status)
		} else if k, v, ok := strings.Cut(line, ": "); ok && strings.EqualFold(k, "WWW-Authenticate") && a.challenge == "" {
			a.challenge = v
		}
	}
	if err := json.Unmarshal([]byte(body), &a.body); err != nil {
		t.Fatalf("curl %v: body %q: %v", args, body, err)
	}
	return a
}

// The HTTP and gRPC doors of the binary with --aclfile, driven by curl and
// by Envoy's generated RLS client: credentials map to the ACL file's users,
// every key a request names is checked against the user's patterns (a
// request with one foreign key is refused whole and spends nothing), 401 /
// Unauthenticated for no or wrong credentials, 403 / PermissionDenied
// otherwise; the refusals are in ACL LOG; a SIGHUP reload applies at once.
func TestDoorsACL(t *testing.T) {
	curl := requireTool(t, "curl")
	c := redistest.NewCluster(t, localredis.Config{Replicas: -1})
	aclPath := writeACL(t, doorsUsers)
	p, addr := startWithHTTP(t, "--cluster", strings.Join(c.Addrs(), ","), "--aclfile", aclPath,
		"--config", writeConfig(t, doorsPolicy), "--grpc", "127.0.0.1:0", "--timeout", "2s")
	base := "http://" + addr
	acme := doorsAcmePass

	// HTTP, with curl.
	steps := []struct {
		what string
		args []string
		want string // status and body; for a decision only "200 remaining=N"
	}{
		{"no credentials", []string{base + "/v1/check?key=acme:h"},
			`401 {"error":"authentication required: Authorization: Bearer \u003cpassword\u003e, Bearer \u003cuser\u003e:\u003cpassword\u003e or Basic"}`},
		{"a wrong password", []string{"-u", "acme:guess", base + "/v1/check?key=acme:h"}, `401 {"error":"invalid credentials"}`},
		{"acme takes 2 of its own", []string{"-u", "acme:" + acme, "-d", `{"key":"acme:h","cost":2}`, base + "/v1/take"}, "200 remaining=3"},
		{"acme checks beta's key", []string{"-u", "acme:" + acme, base + "/v1/check?key=beta:h"}, `403 {"error":"NOPERM No permissions to access a key"}`},
		{"acme's batch with one of beta's keys", []string{"-u", "acme:" + acme, "-d", `[{"key":"acme:h","cost":3},{"key":"beta:h"}]`, base + "/v1/take"},
			`403 {"error":"NOPERM No permissions to access a key"}`},
		{"beta adjusts acme's key", []string{"-H", "Authorization: Bearer beta:" + doorsBetaPass, "-d", `{"key":"acme:h","delta":-2}`, base + "/v1/adjust"},
			`403 {"error":"NOPERM User beta has no permissions to run the 'rl.adjust' command"}`},
		{"beta takes acme's key", []string{"-H", "Authorization: Bearer beta:" + doorsBetaPass, "-d", `{"key":"acme:h","cost":3}`, base + "/v1/take"},
			`403 {"error":"NOPERM No permissions to access a key"}`},
		{"acme, bearer user:pass: the refusals spent nothing", []string{"-H", "Authorization: Bearer acme:" + acme, base + "/v1/check?key=acme:h"}, "200 remaining=2"},
	}
	for _, s := range steps {
		a := curlDoor(t, curl, s.args...)
		got := a.String()
		if a.status == 200 {
			got = "200 remaining=" + a.field("remaining")
		}
		if got != s.want {
			t.Errorf("curl, %s:\n got %s\nwant %s", s.what, got, s.want)
		}
		if a.status == 401 && !strings.HasPrefix(a.challenge, `Bearer realm="sluice"`) {
			t.Errorf("curl, %s: WWW-Authenticate %q", s.what, a.challenge)
		}
	}

	// gRPC, with Envoy's generated client.
	door := rlsClient(t, grpcAddr(t, p), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	as := func(v string) context.Context {
		if v == "" {
			return ctx
		}
		return metadata.AppendToOutgoingContext(ctx, "authorization", v)
	}
	grpcSteps := []struct {
		what, auth string
		r          *rlsv3.RateLimitRequest
		want       string // the status, or the response's codes
	}{
		{"no credentials", "", rlsRequest("acme", 0, []string{"path", "/g"}), "Unauthenticated"},
		{"a wrong password", "Bearer acme:guess", rlsRequest("acme", 0, []string{"path", "/g"}), "Unauthenticated"},
		{"acme takes 2 of its own", "Bearer acme:" + acme, rlsRequest("acme", 2, []string{"path", "/g"}), "OK OK/3"},
		{"acme asks for beta's domain", "Bearer acme:" + acme, rlsRequest("beta", 0, []string{"path", "/g"}), "PermissionDenied: NOPERM No permissions to access a key"},
		{"beta, Basic, asks for acme's", "Basic " + base64.StdEncoding.EncodeToString([]byte("beta:"+doorsBetaPass)), rlsRequest("acme", 0, []string{"path", "/g"}),
			"PermissionDenied: NOPERM No permissions to access a key"},
		{"gw: /g with a foreign /h beside it", "Bearer gw:" + doorsGWPass, rlsRequest("acme", 1, []string{"path", "/g"}, []string{"path", "/h"}),
			"PermissionDenied: NOPERM No permissions to access a key"},
		{"gw: /g alone: the refusals spent nothing", "Bearer gw:" + doorsGWPass, rlsRequest("acme", 1, []string{"path", "/g"}), "OK OK/2"},
	}
	for _, s := range grpcSteps {
		resp, err := door.ShouldRateLimit(as(s.auth), s.r)
		got := ""
		switch st, _ := status.FromError(err); {
		case err == nil:
			got = rlsCodes(resp)
		case st.Code() == codes.Unauthenticated:
			got = st.Code().String()
		default:
			got = st.Code().String() + ": " + st.Message()
		}
		if got != s.want {
			t.Errorf("gRPC, %s:\n got %s\nwant %s", s.what, got, s.want)
		}
	}

	// The same bucket through RESP, and the doors' refusals in ACL LOG.
	ops := userClient(t, p.Addr, "ops", doorsOpsPass)
	if got := remaining(t, ops, "RL.PEEK", "acme:h"); got != 2 {
		t.Errorf("RL.PEEK acme:h over RESP: %d left, want 2", got)
	}
	entries, err := ops.Do(ctx, "ACL", "LOG", "20").Slice()
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	for _, e := range entries {
		f, _ := e.([]any)
		m := map[string]string{}
		for i := 0; i+1 < len(f); i += 2 {
			m[fmt.Sprint(f[i])] = fmt.Sprint(f[i+1])
		}
		log = append(log, m["context"]+" "+m["reason"]+" "+m["object"]+" "+m["username"])
		for _, secret := range []string{doorsAcmePass, doorsBetaPass, doorsGWPass, "guess"} {
			if strings.Contains(fmt.Sprint(f), secret) {
				t.Errorf("a password in ACL LOG: %v", f)
			}
		}
	}
	wantLog := []string{ // newest first
		"grpc key acme:path=/h gw",
		"grpc key acme:path=/g beta",
		"grpc key beta:path=/g acme",
		"grpc auth AUTH acme",
		"http key acme:h beta",
		"http command rl.adjust beta",
		"http key beta:h acme",
		"http auth AUTH acme",
	}
	if strings.Join(log, "\n") != strings.Join(wantLog, "\n") {
		t.Errorf("ACL LOG:\n got %q\nwant %q", log, wantLog)
	}

	// A reload (SIGHUP) gives beta acme's keys: the next request is served.
	if err := os.WriteFile(aclPath, []byte(strings.Replace(doorsUsers, "~beta:*", "~beta:* ~acme:*", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	p.Signal(syscall.SIGHUP)
	if !p.waitLog("aclfile reloaded", 20*time.Second) {
		t.Fatalf("no reload logged:\n%s", p.Logs())
	}
	if a := curlDoor(t, curl, "-u", "beta:"+doorsBetaPass, base+"/v1/check?key=acme:h"); a.status != 200 || a.field("remaining") != "1" {
		t.Errorf("curl, beta on acme:h after the reload: %s, want 200 and 1 left", a)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("beta:"+doorsBetaPass))
	if resp, err := door.ShouldRateLimit(as(basic), rlsRequest("acme", 0, []string{"path", "/g"})); err != nil || rlsCodes(resp) != "OK OK/1" {
		t.Errorf("gRPC, beta on acme after the reload: %v %v, want OK OK/1", resp, err)
	}
}
