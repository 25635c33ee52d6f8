package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// The secrets of these tests: distinctive, so that a leak into a log line
// or a reply is found by a plain substring search.
const (
	testUserPass  = "u5er-pw-Zq81"
	testAdminPass = "adm1n-pw-Kx42"
	testStorePass = "st0re-pw-Vw93"
)

// mustTool finds a binary the security tests need; these tests fail rather
// than skip without it, so that they never pass by doing nothing. Under
// -short a missing one skips the test, and redis-server always does.
func mustTool(t *testing.T, name string) string {
	t.Helper()
	if name == "redis-server" {
		redistest.SkipShort(t, name)
	}
	path, err := exec.LookPath(name)
	if err != nil {
		if testing.Short() {
			t.Skipf("%s not found on PATH (-short)", name)
		}
		t.Fatalf("%s not found on PATH: install redis-server and redis-tools (Redis 7, built with TLS) to run the security tests", name)
	}
	return path
}

func writeSecret(t *testing.T, name, secret string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkNoSecrets fails if any secret appears in text.
func checkNoSecrets(t *testing.T, where, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s shows the secret %q:\n%s", where, s, text)
		}
	}
}

// TestSecurityPasswords runs the binary with --requirepass and --admin-pass
// given through files and through the environment: NOAUTH first, AUTH
// works, RL.RESET answers NOPERM until AUTH admin, and neither password
// shows in the log, INFO or CONFIG GET.
func TestSecurityPasswords(t *testing.T) {
	cli := mustTool(t, "redis-cli")
	for _, via := range []string{"file", "env"} {
		t.Run(via, func(t *testing.T) {
			var args []string
			if via == "file" {
				args = []string{"--requirepass-file", writeSecret(t, "pass", testUserPass), "--admin-pass-file", writeSecret(t, "admin", testAdminPass)}
			} else {
				t.Setenv("SLUICE_REQUIREPASS", testUserPass)
				t.Setenv("SLUICE_ADMIN_PASS", testAdminPass)
			}
			p := startSluice(t, append(args, "--log-level", "debug")...)
			ctx := context.Background()

			anon := p.client(t)
			if err := anon.Do(ctx, "RL.TAKE", "k").Err(); err == nil || err.Error() != "NOAUTH Authentication required." {
				t.Fatalf("RL.TAKE without AUTH: %v, want NOAUTH", err)
			}
			host, port := hostPort(t, p.Addr)
			out, _ := exec.Command(cli, "-h", host, "-p", port, "RL.TAKE", "k").CombinedOutput()
			if !strings.Contains(string(out), "NOAUTH Authentication required.") {
				t.Errorf("redis-cli without AUTH printed %q", out)
			}
			out, err := exec.Command(cli, "-h", host, "-p", port, "--no-auth-warning", "--user", "admin", "--pass", testAdminPass, "RL.RESET", "k").CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "0" {
				t.Errorf("redis-cli --user admin RL.RESET: %v %q", err, out)
			}

			user := redis.NewClient(&redis.Options{Addr: p.Addr, Password: testUserPass, MaxRetries: -1})
			t.Cleanup(func() { _ = user.Close() })
			// All 100 tokens of the built-in policy (50/s): the bucket is not
			// full again, so RL.RESET finds state, for the next 2 s.
			if r, err := take(ctx, user, "k", 100); err != nil || !r.Allowed {
				t.Fatalf("RL.TAKE after AUTH: %+v, %v", r, err)
			}
			want := "NOPERM User default has no permissions to run the 'rl.reset' command"
			if err := user.Do(ctx, "RL.RESET", "k").Err(); err == nil || err.Error() != want {
				t.Fatalf("RL.RESET as default: %v, want %s", err, want)
			}
			wrong := redis.NewClient(&redis.Options{Addr: p.Addr, Username: "admin", Password: testUserPass, MaxRetries: -1})
			t.Cleanup(func() { _ = wrong.Close() })
			if err := wrong.Ping(ctx).Err(); err == nil || err.Error() != "WRONGPASS invalid username-password pair or user is disabled." {
				t.Fatalf("AUTH admin with the user's password: %v, want WRONGPASS", err)
			}
			// One connection, so AUTH admin applies to the RL.RESET after it.
			conn := user.Conn()
			t.Cleanup(func() { _ = conn.Close() })
			if err := conn.Do(ctx, "RL.RESET", "k").Err(); err == nil || err.Error() != want {
				t.Fatalf("RL.RESET before AUTH admin: %v", err)
			}
			if err := conn.Do(ctx, "AUTH", "admin", testAdminPass).Err(); err != nil {
				t.Fatalf("AUTH admin: %v", err)
			}
			if n, err := conn.Do(ctx, "RL.RESET", "k").Int(); err != nil || n != 1 {
				t.Fatalf("RL.RESET as admin = %d, %v; want 1", n, err)
			}
			if err := conn.Do(ctx, "HELLO", "2", "AUTH", "default", testUserPass).Err(); err != nil {
				t.Fatalf("HELLO 2 AUTH default: %v", err)
			}
			if err := conn.Do(ctx, "RL.RESET", "k").Err(); err == nil || err.Error() != want {
				t.Fatalf("RL.RESET after HELLO AUTH default: %v, want NOPERM", err)
			}

			var seen strings.Builder
			for _, cmd := range [][]any{{"INFO", "everything"}, {"RL.INFO"}, {"CONFIG", "GET", "*"}, {"CLIENT", "LIST"}} {
				v, err := user.Do(ctx, cmd...).Result()
				if err != nil {
					t.Fatalf("%v: %v", cmd, err)
				}
				seen.WriteString(strings.ReplaceAll(strings.TrimSpace(strings.Join(strings.Fields(toText(v)), " ")), "\r", "") + "\n")
			}
			checkNoSecrets(t, "INFO, CONFIG GET and CLIENT LIST", seen.String(), testUserPass, testAdminPass)
			p.Stop()
			checkNoSecrets(t, "the log", p.Logs(), testUserPass, testAdminPass)
		})
	}
}

func toText(v any) string {
	switch v := v.(type) {
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = toText(x)
		}
		return strings.Join(parts, " ")
	case map[any]any:
		var parts []string
		for k, x := range v {
			parts = append(parts, toText(k), toText(x))
		}
		return strings.Join(parts, " ")
	case string:
		return v
	}
	return ""
}

// TestSecurityNoSecretsInHelpOrErrors: --help shows no secret from the
// environment, and a bad Redis URL's error does not repeat its password.
func TestSecurityNoSecretsInHelpOrErrors(t *testing.T) {
	cmd := exec.Command(binary, "serve", "--help")
	cmd.Env = append(os.Environ(), "SLUICE_REQUIREPASS="+testUserPass, "SLUICE_ADMIN_PASS="+testAdminPass, "SLUICE_STORE_PASS="+testStorePass, "SLUICE_HOME_PASS="+testStorePass)
	out, _ := cmd.CombinedOutput()
	for _, flag := range []string{"-admin-pass", "-tls-cert-file", "-store-tls", "-store-pass-file", "-home-tls", "-home-user", "-home-pass-file"} {
		if !strings.Contains(string(out), flag) {
			t.Errorf("serve --help lacks %s", flag)
		}
	}
	checkNoSecrets(t, "serve --help", string(out), testUserPass, testAdminPass, testStorePass)

	for _, u := range []string{
		"redis://bob:" + testStorePass + "@127.0.0.1:notaport",
		"redis://bob:" + testStorePass + "@[::1",
		"rediss://:" + testStorePass + "@127.0.0.1:1/x?y=%zz",
		"ftp://bob:" + testStorePass + "@127.0.0.1:1",
	} {
		out, err := exec.Command(binary, "serve", "--listen", "127.0.0.1:0", "--admin", "", "--redis", u).CombinedOutput()
		if err == nil {
			t.Errorf("--redis %s: sluice started", u)
		}
		checkNoSecrets(t, "the error of a bad --redis URL", string(out), testStorePass)
		if !strings.Contains(string(out), "sluice:") {
			t.Errorf("--redis %s: no error printed: %s", u, out)
		}
	}
	out, err := exec.Command(binary, "serve", "--listen", "127.0.0.1:0", "--admin", "", "--requirepass-file", writeSecret(t, "empty", "")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "empty") {
		t.Errorf("an empty --requirepass-file: %v %s, want an error", err, out)
	}
}

// TestTLSListener: with --tls-cert-file and --tls-key-file, --listen speaks
// TLS only: go-redis trusting the test CA can RL.TAKE, a plain-text client
// cannot, and redis-cli --tls works when it was built with TLS.
func TestTLSListener(t *testing.T) {
	t.Parallel()
	files := redistest.NewTLSFiles(t)
	p := startSluice(t, "--tls-cert-file", files.Cert, "--tls-key-file", files.Key, "--requirepass-file", writeSecret(t, "pass", testUserPass))
	ctx := context.Background()
	tc, err := files.ClientConfig(false)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: p.Addr, TLSConfig: tc, Password: testUserPass, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	if r, err := take(ctx, c, "tls:k", 1); err != nil || !r.Allowed || r.DecidedBy != "embedded" {
		t.Fatalf("RL.TAKE over TLS: %+v, %v", r, err)
	}
	plain := redis.NewClient(&redis.Options{Addr: p.Addr, Password: testUserPass, MaxRetries: -1, ReadTimeout: time.Second})
	t.Cleanup(func() { _ = plain.Close() })
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Fatal("a plain-text client was answered on the TLS listener")
	}

	cli := mustTool(t, "redis-cli")
	help, _ := exec.Command(cli, "--help").CombinedOutput()
	if !strings.Contains(string(help), "--tls") {
		t.Logf("this redis-cli was built without TLS; not checking redis-cli --tls")
		return
	}
	host, port := hostPort(t, p.Addr)
	out, err := exec.Command(cli, "--tls", "--cacert", files.CA, "-h", host, "-p", port, "--no-auth-warning", "-a", testUserPass, "RL.TAKE", "tls:cli").CombinedOutput()
	if f := strings.Fields(string(out)); err != nil || len(f) != 6 || f[0] != "1" || f[5] != "embedded" {
		t.Fatalf("redis-cli --tls RL.TAKE: %v %q", err, out)
	}
	out, _ = exec.Command(cli, "-h", host, "-p", port, "PING").CombinedOutput()
	if strings.Contains(string(out), "PONG") {
		t.Fatalf("redis-cli without --tls was answered: %q", out)
	}
	if strings.Contains(p.Logs(), testUserPass) {
		t.Error("the log shows the password")
	}
}

// TestTLSListenerClientCertificates: with --tls-ca-cert-file and
// --tls-auth-clients, only clients with a certificate from that CA get in.
func TestTLSListenerClientCertificates(t *testing.T) {
	t.Parallel()
	files := redistest.NewTLSFiles(t)
	p := startSluice(t, "--tls-cert-file", files.Cert, "--tls-key-file", files.Key, "--tls-ca-cert-file", files.CA, "--tls-auth-clients")
	ctx := context.Background()
	for _, withCert := range []bool{true, false} {
		tc, err := files.ClientConfig(withCert)
		if err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(&redis.Options{Addr: p.Addr, TLSConfig: tc, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		_, err = take(ctx, c, "mtls", 1)
		if withCert && err != nil {
			t.Errorf("with a client certificate: %v", err)
		}
		if !withCert && err == nil {
			t.Error("without a client certificate: served")
		}
	}
}

// startTLSRedis runs a redis-server that speaks TLS only, requires a client
// certificate and the password testStorePass.
func startTLSRedis(t *testing.T, files *localredis.TLSFiles) string {
	t.Helper()
	return startTLSRedisPass(t, files, testStorePass)
}

// startTLSRedisPass is startTLSRedis with the password pass.
func startTLSRedisPass(t *testing.T, files *localredis.TLSFiles, pass string) string {
	t.Helper()
	serverBin := mustTool(t, "redis-server")
	dir := t.TempDir()
	var (
		addr string
		last error
	)
	for range 5 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		cmd := exec.Command(serverBin, "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--tls-cert-file", files.Cert, "--tls-key-file", files.Key, "--tls-ca-cert-file", files.CA,
			"--tls-auth-clients", "yes", "--requirepass", pass,
			"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if last = waitTLSRedis(addr, files, pass, exited); last == nil {
			return addr
		}
		_ = cmd.Process.Kill()
	}
	logs, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
	t.Fatalf("redis-server with TLS did not start: %v\n%s", last, logs)
	return ""
}

func waitTLSRedis(addr string, files *localredis.TLSFiles, pass string, exited <-chan struct{}) error {
	tc, err := files.ClientConfig(true)
	if err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: tc, Password: pass, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return err
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTLSToRedis: sluice reaches a TLS-only, password-protected
// redis-server through rediss://, the CA and client-certificate flags and
// SLUICE_STORE_PASS; the decisions are the store's, and the password shows
// nowhere.
func TestTLSToRedis(t *testing.T) {
	files := redistest.NewTLSFiles(t)
	addr := startTLSRedis(t, files)
	t.Setenv("SLUICE_STORE_PASS", testStorePass)
	p := startSluice(t, "--redis", "rediss://"+addr, "--store-tls-ca-file", files.CA,
		"--store-tls-cert-file", files.ClientCert, "--store-tls-key-file", files.ClientKey, "--log-level", "debug")
	ctx := context.Background()
	c := p.client(t)
	r, err := take(ctx, c, "tls:store", 1)
	// The first requests open TLS connections, which may take longer than
	// the default 50ms store timeout and so be decided by the fallback.
	for i := 0; i < 10 && err == nil && r.DecidedBy != "store"; i++ {
		t.Logf("RL.TAKE %d decided by %s while connecting", i, r.DecidedBy)
		time.Sleep(50 * time.Millisecond)
		r, err = take(ctx, c, "tls:store", 1)
	}
	if err != nil || !r.Allowed || r.DecidedBy != "store" {
		t.Fatalf("RL.TAKE through TLS Redis: %+v, %v\n%s", r, err, p.Logs())
	}
	info, err := c.Do(ctx, "INFO", "everything").Text()
	if err != nil {
		t.Fatal(err)
	}
	checkNoSecrets(t, "INFO", info, testStorePass)
	p.Stop()
	checkNoSecrets(t, "the log", p.Logs(), testStorePass)

	// Without the CA, Redis's certificate does not verify: no admission by
	// the store. The password in the URL this time, to check it is not
	// printed either.
	bad := startSluice(t, "--redis", "rediss://:"+testStorePass+"@"+addr, "--store-tls-cert-file", files.ClientCert, "--store-tls-key-file", files.ClientKey, "--timeout", "2s")
	r, err = take(ctx, bad.client(t), "tls:bad", 1)
	if err == nil && r.DecidedBy == "store" {
		t.Fatalf("decided by a store whose certificate is not trusted: %+v", r)
	}
	bad.Stop()
	checkNoSecrets(t, "the log", bad.Logs(), testStorePass)

	// And with --store-tls on a redis:// URL.
	plainURL := startSluice(t, "--redis", "redis://"+addr, "--store-tls", "--store-tls-ca-file", files.CA,
		"--store-tls-cert-file", files.ClientCert, "--store-tls-key-file", files.ClientKey, "--timeout", "2s")
	if r, err := take(ctx, plainURL.client(t), "tls:store2", 1); err != nil || r.DecidedBy != "store" {
		t.Fatalf("RL.TAKE with --store-tls: %+v, %v", r, err)
	}
}
