package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestRESP3RedisCLI: redis-cli -3 --user/--pass against sluice --aclfile
// speaks RESP3: redis-cli shows HELLO's and CONFIG GET's maps as maps
// ("1# ... =>"), CLIENT INFO says resp=3, COMMAND DOCS rl.take is a map,
// and RL.TAKE is the same six-element array.
func TestRESP3RedisCLI(t *testing.T) {
	t.Parallel()
	cli := requireTool(t, "redis-cli")
	s := startSluice(t, "--aclfile", writeACL(t, aclUsers), "--config", writeConfig(t, aclPolicy))
	host, port := hostPort(t, s.Addr)
	as := func(user, pass string, args ...string) string {
		t.Helper()
		out, err := exec.Command(cli, append([]string{"-3", "-h", host, "-p", port, "--no-auth-warning", "--no-raw", "--user", user, "--pass", pass}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli -3 %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	steps := []struct {
		user, pass string
		args       []string
		want       string // a part of the output
	}{
		{"acme", aclAcmePass, []string{"RL.TAKE", "acme:x"}, "1) (integer) 1\n2) (integer) 5\n3) (integer) 4\n4) (integer) -1"},
		{"acme", aclAcmePass, []string{"HELLO"}, `3# "proto" => (integer) 3`},
		{"acme", aclAcmePass, []string{"ACL", "WHOAMI"}, `"acme"`},
		{"acme", aclAcmePass, []string{"CLIENT", "INFO"}, " user=acme "},
		{"acme", aclAcmePass, []string{"CLIENT", "INFO"}, " resp=3"},
		{"acme", aclAcmePass, []string{"CLIENT", "GETNAME"}, "(nil)"},
		{"acme", aclAcmePass, []string{"RL.TAKE", "beta:x"}, "(error) NOPERM No permissions to access a key"},
		{"ops", aclOpsPass, []string{"CONFIG", "GET", "databases"}, `1# "databases" => "1"`},
		{"ops", aclOpsPass, []string{"COMMAND", "DOCS", "rl.take"}, "1# \"rl.take\" => \n   1# \"summary\" => "},
		{"ops", aclOpsPass, []string{"COMMAND", "DOCS", "rl.take"}, `1) 1# "name" => "key"`},
		{"ops", aclOpsPass, []string{"COMMAND", "INFO", "rl.take"}, "3) 1~ write\n"},
	}
	for _, st := range steps {
		if got := as(st.user, st.pass, st.args...); !strings.Contains(got, st.want) {
			t.Errorf("%s: %v:\n got %q\nwant it to contain %q", st.user, st.args, got, st.want)
		}
	}
}

// TestRESP3GoRedisUser: go-redis with Protocol 3 and Username against the
// binary: HELLO 3 AUTH is answered, not refused, so go-redis does not fall
// back to RESP2: HELLO's map says proto 3, CLIENT INFO resp=3, CONFIG GET is
// a map, and the user is acme.
func TestRESP3GoRedisUser(t *testing.T) {
	t.Parallel()
	s := startSluice(t, "--aclfile", writeACL(t, aclUsers), "--config", writeConfig(t, aclPolicy))
	ctx := context.Background()
	acme := redis.NewClient(&redis.Options{Addr: s.Addr, Username: "acme", Password: aclAcmePass, Protocol: 3, MaxRetries: -1})
	t.Cleanup(func() { _ = acme.Close() })
	conn := acme.Conn() // one connection, so HELLO reports the handshake's protocol
	t.Cleanup(func() { _ = conn.Close() })
	hello, err := conn.Do(ctx, "HELLO").Result()
	if m, ok := hello.(map[any]any); err != nil || !ok || m["proto"] != int64(3) {
		t.Errorf("HELLO = %#v, %v; want a map with proto 3", hello, err)
	}
	info, err := conn.ClientInfo(ctx).Result()
	if err != nil || info.Resp != 3 || info.User != "acme" {
		t.Errorf("CLIENT INFO = %+v, %v; want resp 3, user acme", info, err)
	}
	if got, err := conn.Do(ctx, "ACL", "WHOAMI").Text(); err != nil || got != "acme" {
		t.Errorf("ACL WHOAMI = %q, %v", got, err)
	}
	if got := remaining(t, acme, "RL.TAKE", "acme:go3"); got != 4 {
		t.Errorf("RL.TAKE acme:go3: remaining %d, want 4", got)
	}
	ops := redis.NewClient(&redis.Options{Addr: s.Addr, Username: "ops", Password: aclOpsPass, Protocol: 3, MaxRetries: -1})
	t.Cleanup(func() { _ = ops.Close() })
	cfg, err := ops.Do(ctx, "CONFIG", "GET", "databases").Result()
	if m, ok := cfg.(map[any]any); err != nil || !ok || m["databases"] != "1" {
		t.Errorf("CONFIG GET databases = %#v, %v; want the map {databases: 1}", cfg, err)
	}
	bad := redis.NewClient(&redis.Options{Addr: s.Addr, Username: "acme", Password: aclBetaPass, Protocol: 3, MaxRetries: -1})
	t.Cleanup(func() { _ = bad.Close() })
	if err := bad.Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Errorf("a wrong password: %v, want WRONGPASS", err)
	}
}
