package server

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/acl"
)

// noPermReset is Redis's refusal of RL.RESET to the default user.
const noPermReset = "NOPERM User default has no permissions to run the 'rl.reset' command"

// TestAuthAdmin walks one connection through the admin user: NOAUTH first,
// NOPERM for RL.RESET as the default user, OK as admin, and back.
func TestAuthAdmin(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{RequirePass: "s3cret", AdminPass: "adm1n"})
	r := dialRaw(t, addr)
	steps := []struct{ send, want string }{
		{"RL.RESET k\r\n", "-NOAUTH Authentication required."},
		{"HELLO 2 AUTH admin wrong\r\n", "-WRONGPASS invalid username-password pair or user is disabled."},
		{"AUTH admin s3cret\r\n", "-WRONGPASS invalid username-password pair or user is disabled."},
		{"AUTH default adm1n\r\n", "-WRONGPASS invalid username-password pair or user is disabled."},
		{"AUTH adm1n\r\n", "-WRONGPASS invalid username-password pair or user is disabled."},
		{"PING\r\n", "-NOAUTH Authentication required."},
		{"AUTH s3cret\r\n", "+OK"},
		{"RL.TAKE k\r\n", "[:1 :10 :9 :-1 :1000 $store]"},
		{"RL.RESET k\r\n", "-NOPERM User default has no permissions to run the 'rl.reset' command"},
		{"CLIENT INFO\r\n", "user=default"},
		{"AUTH admin wrong\r\n", "-WRONGPASS invalid username-password pair or user is disabled."},
		{"RL.RESET k\r\n", "-NOPERM User default has no permissions to run the 'rl.reset' command"},
		{"AUTH admin adm1n\r\n", "+OK"},
		{"RL.RESET k\r\n", ":1"},
		{"RL.TAKE k\r\n", "[:1 :10 :9 :-1 :1000 $store]"},
		{"CLIENT INFO\r\n", "user=admin"},
		// A failed AUTH keeps the user the connection had.
		{"AUTH admin nope\r\n", "-WRONGPASS invalid username-password pair or user is disabled."},
		{"RL.RESET k\r\n", ":1"},
		{"AUTH default s3cret\r\n", "+OK"},
		{"RL.RESET k\r\n", "-NOPERM User default has no permissions to run the 'rl.reset' command"},
		{"RESET\r\n", "+RESET"},
		{"RL.RESET k\r\n", "-NOAUTH Authentication required."},
		{"HELLO 2 AUTH admin adm1n\r\n", "[$server $sluice $version $7.0.0 $proto :2 $id :1 $mode $standalone $role $master $modules []]"},
		{"RL.RESET k\r\n", ":0"},
		{"RESET\r\n", "+RESET"},
		{"HELLO 2 AUTH default s3cret\r\n", "[$server $sluice $version $7.0.0 $proto :2 $id :1 $mode $standalone $role $master $modules []]"},
		{"RL.RESET k\r\n", "-NOPERM User default has no permissions to run the 'rl.reset' command"},
		// A pipeline: the NOPERM is that command's reply only.
		{"RL.TAKE p\r\nRL.RESET p\r\nRL.TAKE p\r\n", "[:1 :10 :9 :-1 :1000 $store]"},
		{"", "-NOPERM User default has no permissions to run the 'rl.reset' command"},
		{"", "[:1 :10 :8 :-1 :2000 $store]"},
	}
	for _, s := range steps {
		if s.send != "" {
			r.send(s.send)
		}
		got := r.readReply()
		if strings.HasPrefix(s.want, "user=") {
			if !strings.Contains(got, " "+s.want+" ") {
				t.Errorf("%q -> %s, want it to contain %s", s.send, got, s.want)
			}
			continue
		}
		if got != s.want {
			t.Errorf("%q -> %s, want %s", s.send, got, s.want)
		}
	}
}

// TestAuthAdminWithoutRequirePass: clients need no password, but RL.RESET
// still needs admin's; and AUTH default takes any password, as Redis's
// nopass default user does.
func TestAuthAdminWithoutRequirePass(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{AdminPass: "adm1n"})
	r := dialRaw(t, addr)
	steps := []struct{ send, want string }{
		{"RL.TAKE k\r\n", "[:1 :10 :9 :-1 :1000 $store]"},
		{"RL.RESET k\r\n", "-NOPERM User default has no permissions to run the 'rl.reset' command"},
		{"AUTH adm1n\r\n", "-" + string(errNoPassword)},
		{"AUTH default anything\r\n", "+OK"},
		{"AUTH admin adm1n\r\n", "+OK"},
		{"RL.RESET k\r\n", ":1"},
	}
	for _, s := range steps {
		r.send(s.send)
		if got := r.readReply(); got != s.want {
			t.Errorf("%q -> %s, want %s", s.send, got, s.want)
		}
	}
}

// TestAuthNoAdminUser: without AdminPass there is no admin user, and
// RL.RESET is open to every authenticated client, as before.
func TestAuthNoAdminUser(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{RequirePass: "s3cret"})
	r := dialRaw(t, addr)
	steps := []struct{ send, want string }{
		{"AUTH admin \r\n", "-WRONGPASS invalid username-password pair or user is disabled."},
		{"AUTH admin s3cret\r\n", "-WRONGPASS invalid username-password pair or user is disabled."},
		{"RL.RESET k\r\n", "-NOAUTH Authentication required."},
		{"AUTH s3cret\r\n", "+OK"},
		{"RL.RESET k\r\n", ":0"},
	}
	for _, s := range steps {
		r.send(s.send)
		if got := r.readReply(); got != s.want {
			t.Errorf("%q -> %s, want %s", s.send, got, s.want)
		}
	}
}

// TestAuthAdminSubcommand: a container's subcommands have categories of
// their own, so RL.POLICY GET is open to default while RL.POLICY SET is
// admin's. The flagAdmin marks of the command table agree with @admin.
func TestAuthAdminSubcommand(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{AdminPass: "adm1n"})
	r := dialRaw(t, addr)
	steps := []struct{ send, want string }{
		{"RL.POLICY GET x\r\n", "-ERR RL.POLICY is not available on this server"},
		{"RL.POLICY SET x {}\r\n", "-NOPERM User default has no permissions to run the 'rl.policy|set' command"},
		{"AUTH admin adm1n\r\n", "+OK"},
		{"RL.POLICY SET x {}\r\n", "-ERR RL.POLICY is not available on this server"},
	}
	for _, s := range steps {
		r.send(s.send)
		if got := r.readReply(); got != s.want {
			t.Errorf("%q -> %s, want %s", s.send, got, s.want)
		}
	}
	for _, cmd := range leaves(newCommandTable()) {
		if cat, _ := acl.Category(cmd.name); cmd.flags&flagAdmin != 0 && cat != acl.CatAdmin {
			t.Errorf("%s is flagged admin but its category is @%s", cmd.name, cat)
		}
	}
}

// TestAuthGoRedisAdmin: go-redis's own handshake (HELLO 3 AUTH, refused,
// then AUTH) works for the admin user.
func TestAuthGoRedisAdmin(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{RequirePass: "s3cret", AdminPass: "adm1n"})
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		none := client(t, addr, func(o *redis.Options) { o.Protocol = proto })
		if err := none.Ping(ctx).Err(); err == nil || err.Error() != string(errNoAuth) {
			t.Errorf("resp%d: PING without AUTH: %v, want NOAUTH", proto, err)
		}
		user := client(t, addr, func(o *redis.Options) { o.Protocol = proto; o.Password = "s3cret" })
		if err := user.Do(ctx, "RL.RESET", "k").Err(); err == nil || err.Error() != noPermReset {
			t.Errorf("resp%d: RL.RESET as default: %v, want NOPERM", proto, err)
		}
		admin := client(t, addr, func(o *redis.Options) { o.Protocol = proto; o.Username = "admin"; o.Password = "adm1n" })
		if err := admin.Do(ctx, "RL.RESET", "k").Err(); err != nil {
			t.Errorf("resp%d: RL.RESET as admin: %v", proto, err)
		}
		bad := client(t, addr, func(o *redis.Options) { o.Protocol = proto; o.Username = "admin"; o.Password = "s3cret" })
		if err := bad.Ping(ctx).Err(); err == nil || err.Error() != string(errWrongPass) {
			t.Errorf("resp%d: admin with default's password: %v, want WRONGPASS", proto, err)
		}
	}
}

// TestNoSecretsInInfoOrConfig: INFO, CONFIG GET * and CLIENT LIST never
// show a password.
func TestNoSecretsInInfoOrConfig(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{RequirePass: "s3cret-user-pw", AdminPass: "s3cret-admin-pw"})
	rdb := client(t, addr, func(o *redis.Options) { o.Username = "admin"; o.Password = "s3cret-admin-pw" })
	ctx := context.Background()
	for _, cmd := range [][]any{{"INFO", "everything"}, {"CONFIG", "GET", "*"}, {"CLIENT", "LIST"}, {"CLIENT", "INFO"}, {"RL.INFO"}} {
		v, err := rdb.Do(ctx, cmd...).Result()
		if err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		if s := strings.ToLower(fmtAny(v)); strings.Contains(s, "s3cret") {
			t.Errorf("%v shows a password: %s", cmd, s)
		}
	}
}

func fmtAny(v any) string {
	switch v := v.(type) {
	case []any:
		var b strings.Builder
		for _, x := range v {
			b.WriteString(fmtAny(x) + " ")
		}
		return b.String()
	case map[any]any: // RESP3's maps (CONFIG GET), go-redis's default
		var b strings.Builder
		for k, x := range v {
			b.WriteString(fmtAny(k) + " " + fmtAny(x) + " ")
		}
		return b.String()
	case string:
		return v
	}
	return ""
}
