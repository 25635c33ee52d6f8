package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
			`401 {"error":"authentication required: Authorization: Basic user:password, or Bearer user:password or the default password"}`},
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
		f, ok := e.(map[any]any) // go-redis speaks RESP3: each entry is a map
		if !ok {
			t.Fatalf("ACL LOG entry %#v, want a map", e)
		}
		m := map[string]string{}
		for k, v := range f {
			m[fmt.Sprint(k)] = fmt.Sprint(v)
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

// shellWords splits a command line of the docs as sh would for the forms
// they use: words separated by spaces, '…' taken literally, "…" with \"
// and \\ unescaped.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote == '\'' && c == '\'', quote == '"' && c == '"':
			quote = 0
		case quote == '"' && c == '\\' && i+1 < len(line) && (line[i+1] == '"' || line[i+1] == '\\'):
			i++
			w.WriteByte(line[i])
		case quote != 0:
			w.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		t.Fatalf("unclosed quote in %q", line)
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// sameAnswer reports whether the JSON line got is the page's want, the
// times excepted: a reset_after_ms or retry_after_ms may be up to slack ms
// below the page's (the session's clock ran on).
func sameAnswer(got, want string, slack int64) bool {
	if got == want {
		return true
	}
	var g, w map[string]any
	if json.Unmarshal([]byte(got), &g) != nil || json.Unmarshal([]byte(want), &w) != nil || len(g) != len(w) {
		return false
	}
	for k, wv := range w {
		gv, ok := g[k]
		if !ok {
			return false
		}
		if k == "reset_after_ms" || k == "retry_after_ms" {
			gn, gok := gv.(float64)
			wn, wok := wv.(float64)
			if gok && wok && gn <= wn && gn >= wn-float64(slack) {
				continue
			}
		}
		if fmt.Sprint(gv) != fmt.Sprint(wv) {
			return false
		}
	}
	return true
}

// The users session of docs/http.md, typed into curl one command at a time
// against the binary with the page's ACL file and policy: every answer must
// be the page's (times within the session's duration below it).
func TestHTTPUsersDocSession(t *testing.T) {
	t.Parallel()
	curl := requireTool(t, "curl")
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs/http.md"))
	if err != nil {
		t.Fatal(err)
	}
	users := strings.Join(docBlock(t, string(raw), "http-users-test: aclfile"), "\n") + "\n"
	_, addr := startWithHTTP(t, "--aclfile", writeACL(t, users), "--config", writeConfig(t, doorsPolicy))
	start := time.Now()
	var args, want []string
	n := 0
	check := func() {
		if args == nil {
			return
		}
		out, err := exec.Command(curl, args...).Output()
		if err != nil {
			t.Errorf("curl %q: %v", args, err)
			return
		}
		got := strings.Split(strings.TrimSpace(string(out)), "\n")
		slack := time.Since(start).Milliseconds() + 1
		if len(got) != len(want) {
			t.Errorf("curl %q:\n got %q\nwant %q", args, got, want)
			return
		}
		for i := range got {
			if !sameAnswer(got[i], want[i], slack) {
				t.Errorf("curl %q: line %d is %s, the page has %s", args, i+1, got[i], want[i])
			}
		}
	}
	for _, l := range docBlock(t, string(raw), "http-users-test: session") {
		if c, ok := strings.CutPrefix(l, "$ curl "); ok {
			check()
			args, want = shellWords(t, c), nil
			for i := range args {
				args[i] = strings.ReplaceAll(args[i], "localhost:8080", addr)
			}
			n++
			continue
		}
		if strings.HasPrefix(l, "$ ") {
			continue // the page's own sluice serve: started above
		}
		want = append(want, l)
	}
	check()
	if n < 6 {
		t.Errorf("the session has %d curl commands; the page's block is not what this test expects", n)
	}
}
