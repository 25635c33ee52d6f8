package main

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// leak is one secret given to sluice: where it came from, and its value,
// distinctive so that a plain substring search of the log finds it.
type leak struct{ from, value string }

// checkLogForLeaks fails, naming the source and quoting the lines, for
// every secret that appears in log.
func checkLogForLeaks(t *testing.T, which, log string, leaks []leak) {
	t.Helper()
	for _, l := range leaks {
		var lines []string
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, l.value) {
				lines = append(lines, line)
			}
		}
		if len(lines) > 0 {
			t.Errorf("the log of %s shows the secret of %s (%q) in %d line(s):\n%s", which, l.from, l.value, len(lines), strings.Join(lines, "\n"))
		}
	}
}

// keyLeaks are the base64 lines of the PEM private keys at paths: a log
// line holding any of them shows (part of) a key.
func keyLeaks(t *testing.T, paths ...string) []leak {
	t.Helper()
	var out []leak
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); len(line) >= 16 && !strings.HasPrefix(line, "-----") {
				out = append(out, leak{"the contents of " + p, line})
			}
		}
	}
	return out
}

// TestSecurityNoSecretInLogs runs the binary with every secret flag and
// environment variable set at once, each to its own value (the ones that
// lose to another source too), makes it work through every door, with
// right and wrong passwords, reload on SIGHUP and stop, and then searches
// everything it wrote to stderr (its log, go-redis's own lines, errors)
// for each secret: no secret may appear in any log line. One process has
// the RESP, HTTP and gRPC doors on TLS, a TLS, password-protected regional
// Redis and a home store for a global policy, TLS and password-protected
// too (its own CA, client certificate and password); a second one has a
// primary under Sentinel, both with passwords; a third, first, has
// --aclfile (checkACLSecrets).
func TestSecurityNoSecretInLogs(t *testing.T) {
	mustTool(t, "redis-server")
	checkACLSecrets(t)
	var (
		requirePassFlag = leak{"--requirepass", "rqp-flag-Qm41"}
		requirePassFile = leak{"--requirepass-file", "rqp-file-Hn52"}
		requirePassEnv  = leak{"SLUICE_REQUIREPASS", "rqp-env-Jt63"}
		adminPassFlag   = leak{"--admin-pass", "adm-flag-Lp74"}
		adminPassFile   = leak{"--admin-pass-file", "adm-file-Wd85"}
		adminPassEnv    = leak{"SLUICE_ADMIN_PASS", "adm-env-Zc96"}
		storeURLPass    = leak{"the --redis URL's password", "sto-url-Bv17"}
		storePassFile   = leak{"--store-pass-file", "sto-file-Ny28"}
		storePassEnv    = leak{"SLUICE_STORE_PASS", "sto-env-Kr39"}
		homeURLPass     = leak{"the --home-redis URL's password", "hom-url-Gx40"}
		homePassFile    = leak{"--home-pass-file", "hom-file-Hy51"}
		homePassEnv     = leak{"SLUICE_HOME_PASS", "hom-env-Iz62"}
		wrongPass       = leak{"a wrong password a client sent", "wrong-pw-Ux51"}
		sentinelFile    = leak{"--sentinel-pass-file", "sen-file-Ea62"}
		sentinelEnv     = leak{"SLUICE_SENTINEL_PASS", "sen-env-Fo73"}
		primaryPassFile = leak{"--store-pass-file (Sentinel's primary)", "pri-file-Ci84"}
	)
	t.Setenv(requirePassEnv.from, requirePassEnv.value)
	t.Setenv(adminPassEnv.from, adminPassEnv.value)
	t.Setenv(storePassEnv.from, storePassEnv.value)
	t.Setenv(sentinelEnv.from, sentinelEnv.value)
	t.Setenv(homePassEnv.from, homePassEnv.value)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	files, homeFiles := redistest.NewTLSFiles(t), redistest.NewTLSFiles(t)
	regional := startTLSRedisPass(t, files, storePassFile.value)
	home := startTLSRedisPass(t, homeFiles, homePassFile.value)
	a := startSluice(t, "--config", writeConfig(t, regionConfig), "--log-level", "debug", "--timeout", "2s",
		"--admin", "127.0.0.1:0", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
		"--tls-cert-file", files.Cert, "--tls-key-file", files.Key, "--tls-ca-cert-file", files.CA,
		"--requirepass", requirePassFlag.value, "--requirepass-file", writeSecret(t, "requirepass", requirePassFile.value),
		"--admin-pass", adminPassFlag.value, "--admin-pass-file", writeSecret(t, "admin-pass", adminPassFile.value),
		"--redis", "rediss://default:"+storeURLPass.value+"@"+regional, "--store-user", "default",
		"--store-pass-file", writeSecret(t, "store-pass", storePassFile.value),
		"--store-tls-ca-file", files.CA, "--store-tls-cert-file", files.ClientCert, "--store-tls-key-file", files.ClientKey,
		"--store-tls-server-name", "localhost",
		"--region", "eu", "--home-redis", "redis://default:"+homeURLPass.value+"@"+home,
		"--home-user", "default", "--home-pass-file", writeSecret(t, "home-pass", homePassFile.value),
		"--home-tls", "--home-tls-ca-file", homeFiles.CA, "--home-tls-cert-file", homeFiles.ClientCert,
		"--home-tls-key-file", homeFiles.ClientKey, "--home-tls-server-name", "localhost")

	tc, err := files.ClientConfig(false)
	if err != nil {
		t.Fatal(err)
	}
	newClient := func(user, pass string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: a.Addr, TLSConfig: tc, Username: user, Password: pass, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	if err := newClient("", "").Do(ctx, "RL.TAKE", "k").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Errorf("RL.TAKE without AUTH: %v, want NOAUTH", err)
	}
	if err := newClient("", wrongPass.value).Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Errorf("AUTH with a wrong password: %v, want WRONGPASS", err)
	}
	user := newClient("", requirePassFile.value)
	if r, err := take(ctx, user, "k", 1); err != nil || r.DecidedBy != "store" {
		t.Fatalf("RL.TAKE k through the TLS regional store: %+v, %v", r, err)
	}
	poll(t, "a global key decided by the region with home reachable", func() bool {
		r, err := take(ctx, user, "checkout:acme", 1)
		info, _ := user.Info(ctx, "everything").Result()
		return err == nil && r.DecidedBy == "region" && strings.Contains(info, "region_home_reachable:1")
	})
	if n, err := newClient("admin", adminPassFile.value).Do(ctx, "RL.RESET", "k").Int(); err != nil || n != 1 {
		t.Errorf("RL.RESET as admin = %d, %v; want 1", n, err)
	}

	m := httpAddrRE.FindStringSubmatch(a.Logs())
	if m == nil {
		t.Fatal("no http address logged")
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: files.Pool}}}
	if got := call(t, hc, "GET", "https://"+m[1]+"/v1/check?key=k", "", "Authorization", "Bearer "+wrongPass.value); got.status != 401 {
		t.Errorf("HTTP with a wrong token: %d, want 401", got.status)
	}
	if got := call(t, hc, "GET", "https://"+m[1]+"/v1/check?key=k", "", "Authorization", "Bearer "+requirePassFile.value); got.status != 200 {
		t.Errorf("HTTP with the token: %d %v, want 200", got.status, got.body)
	}
	door := rlsClient(t, grpcAddr(t, a), credentials.NewTLS(tc))
	wctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+wrongPass.value)
	if _, err := door.ShouldRateLimit(wctx, rlsRequest("edge", 1, []string{"k", "v"})); status.Code(err) != codes.Unauthenticated {
		t.Errorf("gRPC with a wrong token: %v, want Unauthenticated", err)
	}
	actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+requirePassFile.value)
	if _, err := door.ShouldRateLimit(actx, rlsRequest("edge", 1, []string{"k", "v"})); err != nil {
		t.Errorf("gRPC with the token: %v", err)
	}
	a.Signal(syscall.SIGHUP)
	if !a.waitLog("config reloaded", 10*time.Second) {
		t.Error("no \"config reloaded\" after SIGHUP")
	}
	a.Stop()
	if !strings.Contains(a.Logs(), `msg=stopped`) {
		t.Errorf("the log does not end with msg=stopped:\n%s", a.Logs())
	}

	g := redistest.NewSentinel(t, localredis.SentinelConfig{Replicas: -1, Sentinels: 1,
		Password: primaryPassFile.value, SentinelPassword: sentinelFile.value})
	b := startSluice(t, "--config", writeConfig(t, regionConfig), "--log-level", "debug",
		"--sentinel", g.Flag(), "--sentinel-pass-file", writeSecret(t, "sentinel-pass", sentinelFile.value),
		"--store-pass-file", writeSecret(t, "primary-pass", primaryPassFile.value))
	// Without the flags, the environment's passwords are the ones in force.
	bc := redis.NewClient(&redis.Options{Addr: b.Addr, Password: requirePassEnv.value, MaxRetries: -1})
	t.Cleanup(func() { _ = bc.Close() })
	poll(t, "RL.TAKE decided by the primary under Sentinel", func() bool {
		r, err := take(ctx, bc, "k", 1)
		return err == nil && r.DecidedBy == "store"
	})
	badmin := redis.NewClient(&redis.Options{Addr: b.Addr, Username: "admin", Password: adminPassEnv.value, MaxRetries: -1})
	t.Cleanup(func() { _ = badmin.Close() })
	if n, err := badmin.Do(ctx, "RL.RESET", "k").Int(); err != nil || n != 1 {
		t.Errorf("RL.RESET as admin (SLUICE_ADMIN_PASS) = %d, %v; want 1", n, err)
	}
	b.Signal(syscall.SIGHUP)
	if !b.waitLog("config reloaded", 10*time.Second) {
		t.Error("no \"config reloaded\" after SIGHUP")
	}
	b.Stop()

	all := []leak{requirePassFlag, requirePassFile, requirePassEnv, adminPassFlag, adminPassFile, adminPassEnv,
		storeURLPass, storePassFile, storePassEnv, homeURLPass, homePassFile, homePassEnv, wrongPass, sentinelFile, sentinelEnv, primaryPassFile}
	all = append(all, keyLeaks(t, files.Key, files.ClientKey, homeFiles.ClientKey)...)
	checkLogForLeaks(t, "the TLS, region and three-door process", a.Logs(), all)
	checkLogForLeaks(t, "the Sentinel process", b.Logs(), all)
}
