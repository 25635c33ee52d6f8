package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/redistest"
)

// The users of the ACL tests. The passwords are distinctive, so that a
// test can search the log for them.
const (
	aclAcmePass = "acme-Pw-7731qz"
	aclBetaPass = "beta-Pw-5512qz"
	aclOpsPass  = "ops-Pw-9904qz"
	aclUsers    = "user default off\n" +
		"user acme on >" + aclAcmePass + " ~acme:* +@limit +@slot\n" +
		"user beta on >" + aclBetaPass + " ~beta:* +@limit\n" +
		"user ops on >" + aclOpsPass + " ~* +@all\n"
	aclPolicy = "policies:\n  - name: api\n    match: \"*\"\n    limit: 5\n    rate: 5\n    period: 1h\n    on_store_error: closed\n"
)

// writeACL writes an ACL file into a temp dir and returns its path.
func writeACL(t testing.TB, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// userClient is a go-redis client of the process that authenticates as
// user, as an application would (Options.Username).
func userClient(t testing.TB, addr, user, pass string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: pass, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// remaining is field 3 of an RL.TAKE or RL.PEEK reply.
func remaining(t testing.TB, c *redis.Client, cmd, key string) int64 {
	t.Helper()
	v, err := c.Do(context.Background(), cmd, key).Slice()
	if err != nil || len(v) != 6 {
		t.Fatalf("%s %s: %v %v", cmd, key, v, err)
	}
	return v[2].(int64)
}

// TestACLRedisCLI: redis-cli --user/--pass against sluice --aclfile:
// acme's own keys, NOPERM on another tenant's, an RL.MTAKE with one
// foreign key refused whole and spending nothing, ACL WHOAMI.
func TestACLRedisCLI(t *testing.T) {
	t.Parallel()
	cli := requireTool(t, "redis-cli")
	s := startSluice(t, "--aclfile", writeACL(t, aclUsers), "--config", writeConfig(t, aclPolicy))
	host, port := hostPort(t, s.Addr)
	as := func(user, pass string, args ...string) string {
		out, err := exec.Command(cli, append([]string{"-h", host, "-p", port, "--no-auth-warning", "--no-raw", "--user", user, "--pass", pass}, args...)...).Output()
		if err != nil {
			t.Fatalf("redis-cli %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	steps := []struct {
		user, pass string
		args       []string
		want       string // a prefix of the output
	}{
		{"acme", aclAcmePass, []string{"RL.TAKE", "acme:x"}, "1) (integer) 1\n2) (integer) 5\n3) (integer) 4"},
		{"acme", aclAcmePass, []string{"RL.TAKE", "beta:x"}, "(error) NOPERM No permissions to access a key"},
		{"acme", aclAcmePass, []string{"RL.MTAKE", "acme:m", "2", "beta:m", "2"}, "(error) NOPERM No permissions to access a key"},
		{"acme", aclAcmePass, []string{"RL.MTAKE", "beta:m", "2", "acme:m", "2"}, "(error) NOPERM No permissions to access a key"},
		{"acme", aclAcmePass, []string{"RL.PEEK", "acme:m"}, "1) (integer) 1\n2) (integer) 5\n3) (integer) 5"},
		{"beta", aclBetaPass, []string{"RL.PEEK", "beta:m"}, "1) (integer) 1\n2) (integer) 5\n3) (integer) 5"},
		{"acme", aclAcmePass, []string{"RL.RESET", "acme:x"}, "(error) NOPERM User acme has no permissions to run the 'rl.reset' command"},
		{"acme", aclAcmePass, []string{"RL.ADJUST", "acme:x", "1"}, "(error) NOPERM User acme has no permissions to run the 'rl.adjust' command"},
		{"acme", aclAcmePass, []string{"ACL", "WHOAMI"}, `"acme"`},
		{"acme", aclBetaPass, []string{"ACL", "WHOAMI"}, "(error) NOAUTH Authentication required."},
		{"beta", aclBetaPass, []string{"RL.ACQUIRE", "beta:job"}, "(error) NOPERM User beta has no permissions to run the 'rl.acquire' command"},
		{"ops", aclOpsPass, []string{"RL.TAKE", "beta:x"}, "1) (integer) 1"},
		{"ops", aclOpsPass, []string{"ACL", "USERS"}, "1) \"acme\"\n2) \"beta\"\n3) \"default\"\n4) \"ops\""},
	}
	for _, st := range steps {
		if got := as(st.user, st.pass, st.args...); !strings.HasPrefix(got, st.want) {
			t.Errorf("%s: %v:\n got %q\nwant %q...", st.user, st.args, got, st.want)
		}
	}
}

const aclRedisPy = `
import sys, redis
host, port, pw = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = redis.Redis(host=host, port=port, username="acme", password=pw)
v = r.execute_command("RL.TAKE", "acme:py", 2)
assert v[:3] == [1, 5, 3], v
assert r.execute_command("ACL", "WHOAMI") == b"acme"
for cmd in (("RL.TAKE", "beta:py"), ("RL.MTAKE", "acme:py", 1, "beta:py", 1)):
    try:
        r.execute_command(*cmd)
        raise SystemExit("no error for %r" % (cmd,))
    except redis.exceptions.NoPermissionError as e:
        assert str(e) == "No permissions to access a key", e
assert r.execute_command("RL.PEEK", "acme:py")[2] == 3
try:
    redis.Redis(host=host, port=port, username="acme", password="nope").ping()
    raise SystemExit("no error for a wrong password")
except (redis.exceptions.AuthenticationError, redis.exceptions.ResponseError) as e:
    assert "WRONGPASS" in str(e) or "invalid username-password" in str(e), e
print("ok")
`

// TestACLRedisPy: redis-py's username= against sluice --aclfile.
func TestACLRedisPy(t *testing.T) {
	t.Parallel()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import redis").Run(); err != nil {
		if os.Getenv("CI") != "" && !testing.Short() {
			t.Fatalf("redis-py missing for %s: CI must install python3-redis", py)
		}
		t.Skip("redis-py not installed")
	}
	s := startSluice(t, "--aclfile", writeACL(t, aclUsers), "--config", writeConfig(t, aclPolicy))
	host, port := hostPort(t, s.Addr)
	out, err := exec.Command(py, "-c", aclRedisPy, host, port, aclAcmePass).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("redis-py: %v\n%s", err, out)
	}
}

// TestACLGoRedis: go-redis's Options.Username against sluice --aclfile,
// over RESP2 and over its HELLO 3 fallback.
func TestACLGoRedis(t *testing.T) {
	t.Parallel()
	s := startSluice(t, "--aclfile", writeACL(t, aclUsers), "--config", writeConfig(t, aclPolicy))
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, Username: "acme", Password: aclAcmePass, Protocol: proto, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		key := "acme:go" + strconv.Itoa(proto)
		if got := remaining(t, c, "RL.TAKE", key); got != 4 {
			t.Errorf("resp%d: RL.TAKE %s: remaining %d, want 4", proto, key, got)
		}
		for _, cmd := range [][]any{{"RL.TAKE", "beta:go"}, {"RL.MTAKE", key, 1, "beta:go", 1}} {
			if err := c.Do(ctx, cmd...).Err(); err == nil || err.Error() != "NOPERM No permissions to access a key" {
				t.Errorf("resp%d: %v: %v, want NOPERM", proto, cmd, err)
			}
		}
		if got := remaining(t, c, "RL.PEEK", key); got != 4 {
			t.Errorf("resp%d: after the refused RL.MTAKE, %s has %d, want 4", proto, key, got)
		}
	}
	beta := userClient(t, s.Addr, "beta", aclBetaPass)
	if got := remaining(t, beta, "RL.PEEK", "beta:go"); got != 5 {
		t.Errorf("beta:go has %d after acme's refused commands, want 5", got)
	}
	bad := userClient(t, s.Addr, "acme", aclBetaPass)
	if err := bad.Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Errorf("acme with beta's password: %v, want WRONGPASS", err)
	}
}

// TestACLReload: SIGHUP and ACL LOAD re-read --aclfile; a bad file keeps
// the last good users and says why; the connections of a deleted user
// are closed.
func TestACLReload(t *testing.T) {
	t.Parallel()
	path := writeACL(t, aclUsers)
	s := startSluice(t, "--aclfile", path, "--config", writeConfig(t, aclPolicy), "--watch-config=false") // SIGHUP and ACL LOAD alone
	ctx := context.Background()
	rewrite := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	acme := userClient(t, s.Addr, "acme", aclAcmePass)
	if err := acme.Do(ctx, "RL.TAKE", "shared:x").Err(); err == nil {
		t.Fatal("acme took shared:x before the reload")
	}
	// SIGHUP: acme gains shared:*; its open connection sees it.
	rewrite(strings.Replace(aclUsers, "~acme:* ", "~acme:* ~shared:* ", 1))
	s.Signal(syscall.SIGHUP)
	if !s.waitLog(`msg="aclfile reloaded"`, 10*time.Second) {
		t.Fatalf("no reload logged:\n%s", s.Logs())
	}
	if err := acme.Do(ctx, "RL.TAKE", "shared:x").Err(); err != nil {
		t.Fatalf("acme after the reload: RL.TAKE shared:x: %v", err)
	}
	// A bad file, by SIGHUP: the last good users stay, the log says why.
	rewrite(aclUsers + "user eve on >x +rl.nope\n")
	s.Signal(syscall.SIGHUP)
	if !s.waitLog("aclfile reload failed; keeping the last good users", 10*time.Second) {
		t.Fatalf("no failed reload logged:\n%s", s.Logs())
	}
	if !strings.Contains(s.Logs(), path+":5: user 'eve': error in rule '+rl.nope'") {
		t.Errorf("the failed reload does not name file:line and the rule:\n%s", s.Logs())
	}
	if err := acme.Do(ctx, "RL.TAKE", "shared:y").Err(); err != nil {
		t.Fatalf("acme after a bad reload: %v", err)
	}
	// The same by ACL LOAD: the reply says why.
	ops := userClient(t, s.Addr, "ops", aclOpsPass)
	err := ops.Do(ctx, "ACL", "LOAD").Err()
	if err == nil || !strings.Contains(err.Error(), path+":5: user 'eve'") {
		t.Fatalf("ACL LOAD of a bad file: %v", err)
	}
	// ACL LOAD of a file without beta: beta's open connection is closed.
	beta := userClient(t, s.Addr, "beta", aclBetaPass)
	conn := beta.Conn()
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rewrite(strings.Replace(aclUsers, "user beta on >"+aclBetaPass+" ~beta:* +@limit\n", "", 1))
	if err := ops.Do(ctx, "ACL", "LOAD").Err(); err != nil {
		t.Fatalf("ACL LOAD: %v", err)
	}
	if err := conn.Ping(ctx).Err(); err == nil {
		t.Error("beta's connection still answers after beta was deleted")
	}
	if err := userClient(t, s.Addr, "beta", aclBetaPass).Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Errorf("beta authenticates after being deleted: %v", err)
	}
	if got, err := ops.Do(ctx, "ACL", "USERS").StringSlice(); err != nil || strings.Join(got, " ") != "acme default ops" {
		t.Errorf("ACL USERS = %q, %v", got, err)
	}
}

// TestACLStartErrors: a bad --aclfile, or one beside --requirepass or
// --admin-pass, stops sluice at start with the reason.
func TestACLStartErrors(t *testing.T) {
	t.Parallel()
	good := writeACL(t, aclUsers)
	bad := writeACL(t, "user acme on >"+aclAcmePass+" ~acme:*\n\nuser beta on >"+aclBetaPass+" ~beta:* +@nosuch\n")
	tests := []struct {
		name string
		args []string
		env  []string
		want []string
	}{
		{"bad file", []string{"--aclfile", bad}, nil, []string{bad + ":3: user 'beta': error in rule '+@nosuch': Unknown command or category name in ACL"}},
		{"missing file", []string{"--aclfile", bad + ".nosuch"}, nil, []string{"--aclfile", "no such file"}},
		{"with --requirepass", []string{"--aclfile", good, "--requirepass", "x"}, nil, []string{"--aclfile and --requirepass"}},
		{"with --admin-pass", []string{"--aclfile", good, "--admin-pass", "x"}, nil, []string{"--aclfile and --admin-pass"}},
		{"with SLUICE_REQUIREPASS", []string{"--aclfile", good}, []string{"SLUICE_REQUIREPASS=x"}, []string{"--aclfile and --requirepass", "SLUICE_REQUIREPASS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, append([]string{"serve", "--listen", "127.0.0.1:0", "--admin", ""}, tt.args...)...)
			cmd.Env = append(os.Environ(), tt.env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("serve %v: %v, want it to exit with an error\n%s", tt.args, err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("serve %v says\n%s\nwant it to say %q", tt.args, out, w)
				}
			}
			for _, pw := range []string{aclAcmePass, aclBetaPass} {
				if strings.Contains(string(out), pw) {
					t.Errorf("serve %v shows a password: %s", tt.args, out)
				}
			}
		})
	}
}

// TestCheckCommand: sluice check validates --config and --aclfile
// without starting.
func TestCheckCommand(t *testing.T) {
	t.Parallel()
	good, config := writeACL(t, aclUsers), writeConfig(t, aclPolicy)
	bad := writeACL(t, "user acme on >"+aclAcmePass+" ~acme:* bogus\n")
	tests := []struct {
		args   []string
		ok     bool
		output string
	}{
		{[]string{"--aclfile", good}, true, good + ": ok, 4 users"},
		{[]string{"--config", config, "--aclfile", good}, true, config + ": ok, 1 policies\n" + good + ": ok, 4 users"},
		{[]string{"--aclfile", bad}, false, bad + ":1: user 'acme': error in rule 'bogus': Syntax error"},
		{[]string{}, false, "give --config FILE, --aclfile FILE or both"},
	}
	for _, tt := range tests {
		cmd := exec.Command(binary, append([]string{"check"}, tt.args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if (err == nil) != tt.ok {
			t.Errorf("check %v: %v, want ok %v\n%s%s", tt.args, err, tt.ok, stdout.String(), stderr.String())
		}
		if got := stdout.String() + stderr.String(); !strings.Contains(got, tt.output) {
			t.Errorf("check %v printed\n%s\nwant\n%s", tt.args, got, tt.output)
		}
	}
}

var resetLineRE = regexp.MustCompile(`^5\) \(integer\) (\d+)$`)

// TestACLDocSession replays the redis-cli session of docs/security.md
// against the binary with the page's ACL file: every line as the page has
// it, but a reset_after_ms line (5) may be lower by the session's
// milliseconds.
func TestACLDocSession(t *testing.T) {
	t.Parallel()
	cli := requireTool(t, "redis-cli")
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs/security.md"))
	if err != nil {
		t.Fatal(err)
	}
	users := strings.Join(docBlock(t, string(raw), "acl-test: aclfile"), "\n") + "\n"
	s := startSluice(t, "--aclfile", writeACL(t, users), "--config", writeConfig(t, aclPolicy))
	host, port := hostPort(t, s.Addr)
	start := time.Now()
	var want []string
	var cmd []string
	check := func() {
		if cmd == nil {
			return
		}
		out, _ := exec.Command(cli, append([]string{"-h", host, "-p", port, "--no-auth-warning", "--no-raw"}, cmd...)...).Output()
		got := strings.Split(strings.TrimSpace(string(out)), "\n")
		slack := time.Since(start).Milliseconds() + 1
		if len(got) != len(want) {
			t.Errorf("redis-cli %s:\n got %q\nwant %q", strings.Join(cmd, " "), got, want)
			return
		}
		for i := range got {
			g, w := resetLineRE.FindStringSubmatch(got[i]), resetLineRE.FindStringSubmatch(want[i])
			if g != nil && w != nil {
				gn, _ := strconv.ParseInt(g[1], 10, 64)
				wn, _ := strconv.ParseInt(w[1], 10, 64)
				if gn <= wn && gn >= wn-slack {
					continue
				}
			}
			if got[i] != want[i] {
				t.Errorf("redis-cli %s: line %d is %q, the page has %q", strings.Join(cmd, " "), i+1, got[i], want[i])
			}
		}
	}
	n := 0
	for _, l := range docBlock(t, string(raw), "acl-test: session") {
		if c, ok := strings.CutPrefix(l, "$ redis-cli "); ok {
			check()
			cmd, want = strings.Fields(c), nil
			n++
			continue
		}
		want = append(want, l)
	}
	check()
	if n < 5 {
		t.Errorf("the session has %d commands; the page's block is not what this test expects", n)
	}
}

// checkACLSecrets is TestSecurityNoSecretInLogs's --aclfile process: the
// file's passwords (one given as a #sha256 hash), a wrong password, and a
// password in a bad rule of a reload must appear in no log line, nor any
// password's digest; ACL LIST shows digests only. It runs before the test
// sets SLUICE_REQUIREPASS, which --aclfile refuses beside it.
func checkACLSecrets(t *testing.T) {
	t.Helper()
	var (
		acmePass  = leak{"an --aclfile >password", "acl-acme-Rq18"}
		hashed    = leak{"an --aclfile #hash's password", "acl-hashed-Tb29"}
		wrong     = leak{"a wrong password sent to an --aclfile user", "acl-wrong-Vc30"}
		badRule   = leak{"the password of a bad rule in a reloaded --aclfile", "acl-badrule-Xe41"}
		newPass   = leak{"an --aclfile password after SIGHUP", "acl-new-Yf52"}
		digestHex = func(l leak) leak {
			d := sha256.Sum256([]byte(l.value))
			return leak{"the SHA-256 of " + l.from, hex.EncodeToString(d[:])}
		}
	)
	ctx := context.Background()
	d := sha256.Sum256([]byte(hashed.value))
	users := "user acme on >" + acmePass.value + " ~acme:* +@limit\n" +
		"user ops on #" + hex.EncodeToString(d[:]) + " ~* +@all\n"
	path := writeACL(t, users)
	p := startSluice(t, "--aclfile", path, "--log-level", "debug")
	acme := userClient(t, p.Addr, "acme", acmePass.value)
	if err := acme.Do(ctx, "RL.TAKE", "acme:x").Err(); err != nil {
		t.Fatalf("RL.TAKE as acme: %v", err)
	}
	if err := acme.Do(ctx, "RL.TAKE", "beta:x").Err(); err == nil {
		t.Error("acme took beta:x")
	}
	if err := userClient(t, p.Addr, "acme", wrong.value).Ping(ctx).Err(); err == nil {
		t.Error("a wrong password authenticated")
	}
	ops := userClient(t, p.Addr, "ops", hashed.value)
	list, err := ops.Do(ctx, "ACL", "LIST").StringSlice()
	if err != nil {
		t.Fatalf("ACL LIST: %v", err)
	}
	for _, l := range []leak{acmePass, hashed} {
		if strings.Contains(strings.Join(list, "\n"), l.value) {
			t.Errorf("ACL LIST shows %s: %q", l.from, list)
		}
	}
	var seen strings.Builder
	for _, cmd := range [][]any{{"INFO", "everything"}, {"CONFIG", "GET", "*"}, {"CLIENT", "LIST"}, {"ACL", "LOG"}} {
		v, err := ops.Do(ctx, cmd...).Result()
		if err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		fmt.Fprint(&seen, v)
	}
	checkLogForLeaks(t, "INFO, CONFIG GET, CLIENT LIST and ACL LOG", seen.String(), []leak{acmePass, hashed, wrong, digestHex(acmePass), digestHex(hashed)})
	if err := os.WriteFile(path, []byte(users+"user eve on <"+badRule.value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ops.Do(ctx, "ACL", "LOAD").Err(); err == nil || strings.Contains(err.Error(), badRule.value) {
		t.Errorf("ACL LOAD of a bad rule: %v, want an error without its password", err)
	}
	p.Signal(syscall.SIGHUP)
	if !p.waitLog("aclfile reload failed", 10*time.Second) {
		t.Error("no failed aclfile reload logged")
	}
	if err := os.WriteFile(path, []byte("user acme on >"+newPass.value+" ~acme:* +@limit\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.Signal(syscall.SIGHUP)
	if !p.waitLog(`msg="aclfile reloaded"`, 10*time.Second) {
		t.Error("no aclfile reload logged")
	}
	p.Stop()
	checkLogForLeaks(t, "the --aclfile process", p.Logs(), []leak{acmePass, hashed, wrong, badRule, newPass,
		digestHex(acmePass), digestHex(hashed), digestHex(newPass)})
}

// TestACLRefusedSpendsNothingInRedis: with a real Redis behind sluice, a
// refused RL.MTAKE or CL.THROTTLE writes no key at all, while the same
// user's allowed RL.TAKE does.
func TestACLRefusedSpendsNothingInRedis(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	s := startSluice(t, "--redis", "redis://"+node.Addr, "--aclfile", writeACL(t, aclUsers), "--config", writeConfig(t, aclPolicy))
	ctx := context.Background()
	acme := userClient(t, s.Addr, "acme", aclAcmePass)
	for _, cmd := range [][]any{
		{"RL.MTAKE", "acme:s", 1, "beta:s", 1},
		{"RL.MTAKE", "beta:s", 1, "acme:s", 1},
		{"CL.THROTTLE", "beta:s", 10, 1, 60},
		{"RL.TAKE", "beta:s"},
	} {
		if err := acme.Do(ctx, cmd...).Err(); err == nil || err.Error() != "NOPERM No permissions to access a key" {
			t.Errorf("%v: %v, want NOPERM", cmd, err)
		}
	}
	if keys, err := node.Client().Keys(ctx, "*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("Redis has keys %q (%v) after refused commands only, want none", keys, err)
	}
	if got := remaining(t, acme, "RL.TAKE", "acme:s"); got != 4 {
		t.Fatalf("RL.TAKE acme:s: remaining %d, want 4", got)
	}
	if n, err := node.Client().Exists(ctx, "sluice:{acme:s}").Result(); err != nil || n != 1 {
		t.Fatalf("sluice:{acme:s} not in Redis after an allowed take: %d %v", n, err)
	}
}
