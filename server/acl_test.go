package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/acl"
)

// leaves returns every command of t that runs: those without
// subcommands, their subcommands, and containers that also run alone.
func leaves(t commandTable) []*command {
	var out []*command
	for _, cmd := range t {
		if cmd.subs == nil || cmd.run != nil {
			out = append(out, cmd)
		}
		out = append(out, leaves(cmd.subs)...)
	}
	return out
}

// TestEveryCommandHasACategory: the permission check knows every command
// the server answers, and internal/acl's table names no command the
// server lacks.
func TestEveryCommandHasACategory(t *testing.T) {
	t.Parallel()
	served := map[string]bool{}
	for _, cmd := range leaves(newCommandTable()) {
		served[cmd.name] = true
		if _, ok := acl.Category(cmd.name); !ok {
			t.Errorf("%s has no ACL category in internal/acl", cmd.name)
		}
	}
	for _, name := range acl.CommandsIn(acl.CatAll) {
		if !served[name] {
			t.Errorf("internal/acl lists %s, which the server does not answer", name)
		}
	}
}

const testACL = `
user acme on >acme-pw ~acme:* ~{acme}* +@limit +@slot
user beta on >beta-pw ~beta:* +@limit
user ops on >ops-pw allkeys +@all
user peeker on >peek-pw %R~acme:* +@limit
`

func testUsers(t *testing.T, file string) *acl.Holder {
	t.Helper()
	l, err := acl.Parse("users.acl", []byte(file))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return acl.NewHolder(l)
}

type step struct{ send, want string }

func runSteps(t *testing.T, r *rawConn, steps []step) {
	t.Helper()
	for _, s := range steps {
		if s.send != "" {
			r.send(s.send)
		}
		got := r.readReply()
		if strings.HasPrefix(s.want, "~") {
			if !strings.Contains(got, s.want[1:]) {
				t.Errorf("%q -> %s, want it to contain %s", s.send, got, s.want[1:])
			}
			continue
		}
		if got != s.want {
			t.Errorf("%q -> %s, want %s", s.send, got, s.want)
		}
	}
}

const (
	noPermKey = "-NOPERM No permissions to access a key"
	wrongPass = "-WRONGPASS invalid username-password pair or user is disabled."
	noAuth    = "-NOAUTH Authentication required."
)

// TestACLKeys: a user may touch only the keys of its patterns; a command
// with one key outside them is refused whole and spends nothing.
func TestACLKeys(t *testing.T) {
	t.Parallel()
	fake := newFake(10)
	_, addr := start(t, Config{Decider: fake, Users: testUsers(t, testACL)})
	r := dialRaw(t, addr)
	runSteps(t, r, []step{
		{"RL.TAKE acme:x\r\n", noAuth},
		{"AUTH acme beta-pw\r\n", wrongPass},
		{"AUTH nobody acme-pw\r\n", wrongPass},
		{"AUTH acme-pw\r\n", wrongPass}, // the default user is off
		{"AUTH acme acme-pw\r\n", "+OK"},
		{"ACL WHOAMI\r\n", "$acme"},
		{"PING\r\n", "+PONG"},
		{"RL.TAKE acme:x 3\r\n", "[:1 :10 :7 :-1 :3000 $store]"},
		{"RL.TAKE beta:x\r\n", noPermKey},
		{"RL.PEEK beta:x\r\n", noPermKey},
		{"CL.THROTTLE beta:x 10 1 60\r\n", noPermKey},
		{"RL.TAKE {acme}:y\r\n", "[:1 :10 :9 :-1 :1000 $store]"},
		// One key of another tenant: refused whole, nothing spent.
		{"RL.MTAKE acme:a 4 beta:b 4\r\n", noPermKey},
		{"RL.MTAKE beta:b 4 acme:a 4\r\n", noPermKey},
		{"RL.PEEK acme:a\r\n", "[:1 :10 :10 :-1 :0 $store]"},
		{"RL.MTAKE acme:a 4 acme:b 4\r\n", "~[:1 [[:1 :10 :6"},
		{"RL.RESET acme:x\r\n", "-NOPERM User acme has no permissions to run the 'rl.reset' command"},
		{"RL.ADJUST acme:x 1\r\n", "-NOPERM User acme has no permissions to run the 'rl.adjust' command"},
		{"RL.POLICY SET p {}\r\n", "-NOPERM User acme has no permissions to run the 'rl.policy|set' command"},
		{"ACL LIST\r\n", "-NOPERM User acme has no permissions to run the 'acl|list' command"},
		{"CLIENT LIST\r\n", "-NOPERM User acme has no permissions to run the 'client|list' command"},
		{"INFO\r\n", "-NOPERM User acme has no permissions to run the 'info' command"},
		// A pipeline: each refusal is that command's reply only.
		{"RL.TAKE acme:p\r\nRL.TAKE beta:p\r\nRL.TAKE acme:p\r\n", "[:1 :10 :9 :-1 :1000 $store]"},
		{"", noPermKey},
		{"", "[:1 :10 :8 :-1 :2000 $store]"},
	})
	fake.mu.Lock()
	spent := map[string]int64{}
	for k, v := range fake.used {
		spent[k] = v
	}
	fake.mu.Unlock()
	for _, k := range []string{"beta:x", "beta:b", "beta:p"} {
		if n, ok := spent[k]; ok {
			t.Errorf("%s spent %d, want nothing", k, n)
		}
	}
	if got := spent["acme:a"]; got != 4 {
		t.Errorf("acme:a spent %d, want 4 (the one MTAKE allowed)", got)
	}

	// %R~ grants RL.PEEK, which only reads, and not RL.TAKE.
	p := dialRaw(t, addr)
	runSteps(t, p, []step{
		{"AUTH peeker peek-pw\r\n", "+OK"},
		{"RL.PEEK acme:x\r\n", "[:1 :10 :7 :-1 :3000 $store]"},
		{"RL.TAKE acme:x\r\n", noPermKey},
	})
}

// TestACLAdmin: the admin commands, for a user that has them.
func TestACLAdmin(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{Users: testUsers(t, testACL)})
	acme := dialRaw(t, addr)
	runSteps(t, acme, []step{
		{"AUTH acme acme-pw\r\n", "+OK"},
		{"RL.TAKE beta:x\r\n", noPermKey},
		{"RL.TAKE beta:y\r\n", noPermKey},
		{"RL.TAKE beta:x\r\n", noPermKey},
		{"RL.RESET acme:x\r\n", "~NOPERM"},
		{"AUTH beta acme-pw\r\n", wrongPass},
	})
	ops := dialRaw(t, addr)
	runSteps(t, ops, []step{
		{"HELLO 2 AUTH ops ops-pw\r\n", "~$server $sluice"},
		{"ACL WHOAMI\r\n", "$ops"},
		{"ACL USERS\r\n", "[$acme $beta $default $ops $peeker]"},
		{"ACL CAT\r\n", "[$limit $slot $adjust $admin $read $connection]"},
		{"ACL CAT slot\r\n", "[$rl.acquire $rl.release]"},
		{"ACL CAT nosuch\r\n", "-ERR Unknown category 'nosuch'"},
		{"ACL LOAD\r\n", "-" + string(errNoACLFile)},
		{"ACL SETUSER x on\r\n", "-ERR unknown subcommand 'SETUSER'. Try ACL HELP."},
		{"ACL LOG 1\r\n", "~$count :1 $reason $auth $context $toplevel $object $AUTH $username $beta $age-seconds"},
		{"ACL LOG x\r\n", "-" + string(errNotInteger)},
		{"RL.RESET acme:x\r\n", ":0"},
	})
	ops.send("ACL LIST\r\n")
	got := ops.readReply()
	for _, pw := range []string{"acme-pw", "beta-pw", "ops-pw"} {
		if strings.Contains(got, pw) {
			t.Errorf("ACL LIST shows password %q: %s", pw, got)
		}
	}
	if !strings.Contains(got, "$user acme on #") || !strings.Contains(got, " ~acme:* ~{acme}* resetchannels -@all +@limit +@slot") {
		t.Errorf("ACL LIST = %s", got)
	}
	rdb := client(t, addr, func(o *redis.Options) { o.Username = "ops"; o.Password = "ops-pw" })
	entries, err := rdb.Do(context.Background(), "ACL", "LOG").Slice()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range entries {
		f := e.(map[any]any) // go-redis speaks RESP3: each entry is a map
		if f["reason"] == acl.ReasonCommand && !strings.Contains(f["client-info"].(string), " cmd="+f["object"].(string)+" ") {
			t.Errorf("client-info of a refused %s does not name it: %s", f["object"], f["client-info"])
		}
		lines = append(lines, f["reason"].(string)+" "+f["object"].(string)+" "+f["username"].(string)+" x"+string(rune('0'+f["count"].(int64))))
	}
	want := []string{"auth AUTH beta x1", "command rl.reset acme x1", "key beta:x acme x2", "key beta:y acme x1"}
	if !slices.Equal(lines, want) {
		t.Errorf("ACL LOG (reason object user count) =\n%q\nwant\n%q", lines, want)
	}
	runSteps(t, ops, []step{
		{"ACL LOG RESET\r\n", "+OK"},
		{"ACL LOG\r\n", "[]"},
	})
}

// TestACLReload: a new List applies to open connections at their next
// command; the connection of a deleted user is closed by UsersChanged.
func TestACLReload(t *testing.T) {
	t.Parallel()
	users := testUsers(t, testACL)
	// Set by the test, read by the server's connection goroutine: atomic,
	// since the race detector does not see the order a socket gives.
	var loads atomic.Int32
	var next atomic.Pointer[acl.List]
	srv, addr := start(t, Config{Users: users, LoadUsers: func() error {
		loads.Add(1)
		l := next.Load()
		if l == nil {
			return errors.New("users.acl:2: user 'x': error in rule 'bogus': Syntax error")
		}
		users.Store(l)
		return nil
	}})
	acme := dialRaw(t, addr)
	beta := dialRaw(t, addr)
	ops := dialRaw(t, addr)
	runSteps(t, acme, []step{{"AUTH acme acme-pw\r\n", "+OK"}, {"RL.RESET acme:x\r\n", "~NOPERM"}})
	runSteps(t, beta, []step{{"AUTH beta beta-pw\r\n", "+OK"}})
	runSteps(t, ops, []step{
		{"AUTH ops ops-pw\r\n", "+OK"},
		{"ACL LOAD\r\n", "-ERR users.acl:2: user 'x': error in rule 'bogus': Syntax error"},
	})
	// A failed load keeps the users in force.
	runSteps(t, beta, []step{{"RL.TAKE beta:x\r\n", "~[:1"}})

	l, err := acl.Parse("users.acl", []byte("user acme on >new-pw ~acme:* +@all\nuser ops on >ops-pw allkeys +@all"))
	if err != nil {
		t.Fatal(err)
	}
	next.Store(l)
	runSteps(t, ops, []step{{"ACL LOAD\r\n", "+OK"}})
	runSteps(t, acme, []step{
		{"RL.RESET acme:x\r\n", ":0"}, // its new permissions, at once, with its old password
		{"RL.RESET beta:x\r\n", noPermKey},
	})
	beta.expectClosed()
	if n := loads.Load(); n != 2 {
		t.Errorf("LoadUsers ran %d times, want 2", n)
	}

	// A user turned off cannot authenticate again; its open connection
	// keeps working, as in Redis.
	off, err := acl.Parse("users.acl", []byte("user acme off >new-pw ~acme:* +@all\nuser ops on >ops-pw allkeys +@all"))
	if err != nil {
		t.Fatal(err)
	}
	users.Store(off)
	srv.UsersChanged()
	runSteps(t, acme, []step{{"RL.RESET acme:x\r\n", ":0"}})
	runSteps(t, dialRaw(t, addr), []step{{"AUTH acme new-pw\r\n", wrongPass}})

	// Without ACL LOAD: Store and UsersChanged, as the app does on SIGHUP.
	l2, err := acl.Parse("users.acl", []byte("user ops on >ops-pw allkeys +@all"))
	if err != nil {
		t.Fatal(err)
	}
	users.Store(l2)
	srv.UsersChanged()
	acme.expectClosed()
	runSteps(t, ops, []step{{"ACL USERS\r\n", "[$default $ops]"}})
}

// TestACLUsersExclusive: Users beside RequirePass or AdminPass is a
// configuration error, not a silent choice of one.
func TestACLUsersExclusive(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{Decider: newFake(1), Users: acl.NewHolder(acl.FromFlags("", "")), RequirePass: "x"},
		{Decider: newFake(1), Users: acl.NewHolder(acl.FromFlags("", "")), AdminPass: "x"},
	} {
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "exclusive") {
			t.Errorf("New: %v, want Users and RequirePass or AdminPass refused", err)
		}
	}
}

// TestACLDefaultUser: an ACL file's default user is whatever the file
// says, and off when it says nothing.
func TestACLDefaultUser(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file string
		steps      []step
	}{
		{"absent: off", testACL, []step{
			{"PING\r\n", noAuth},
			{"HELLO 2\r\n", "-" + string(errHelloNoAuth)},
			{"AUTH anything\r\n", wrongPass},
			{"CLIENT INFO\r\n", noAuth},
			{"QUIT\r\n", "+OK"},
		}},
		{"nopass", "user default on nopass ~pub:* +@limit", []step{
			{"ACL WHOAMI\r\n", "$default"},
			{"RL.TAKE pub:x\r\n", "~[:1"},
			{"RL.TAKE acme:x\r\n", noPermKey},
			{"AUTH x\r\n", "-" + string(errNoPassword)},
			{"RESET\r\n", "+RESET"},
			{"RL.TAKE pub:x\r\n", "~[:1"},
		}},
		{"password", "user default on >pw ~* +@limit", []step{
			{"RL.TAKE pub:x\r\n", noAuth},
			{"AUTH pw\r\n", "+OK"},
			{"RL.TAKE pub:x\r\n", "~[:1"},
			{"RL.RESET pub:x\r\n", "-NOPERM User default has no permissions to run the 'rl.reset' command"},
			{"RESET\r\n", "+RESET"},
			{"RL.TAKE pub:x\r\n", noAuth},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, addr := start(t, Config{Users: testUsers(t, tt.file)})
			runSteps(t, dialRaw(t, addr), tt.steps)
		})
	}
}

// TestACLGoRedis: go-redis with Options.Username, as an application would
// connect, over RESP2 and over its HELLO 3 fallback.
func TestACLGoRedis(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{Users: testUsers(t, testACL)})
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		rdb := client(t, addr, func(o *redis.Options) { o.Protocol = proto; o.Username = "acme"; o.Password = "acme-pw" })
		if err := rdb.Do(ctx, "RL.TAKE", "acme:x").Err(); err != nil {
			t.Errorf("resp%d: RL.TAKE acme:x: %v", proto, err)
		}
		if err := rdb.Do(ctx, "RL.TAKE", "beta:x").Err(); err == nil || err.Error() != noPermKey[1:] {
			t.Errorf("resp%d: RL.TAKE beta:x: %v, want %s", proto, err, noPermKey)
		}
		bad := client(t, addr, func(o *redis.Options) { o.Protocol = proto; o.Username = "acme"; o.Password = "beta-pw" })
		if err := bad.Ping(ctx).Err(); err == nil || err.Error() != wrongPass[1:] {
			t.Errorf("resp%d: wrong password: %v, want WRONGPASS", proto, err)
		}
	}
}

// BenchmarkTakeACL is BenchmarkTake's pipeline of 16 for a user of an ACL
// file, whose key is checked against a pattern (~user:*, after one that
// does not match), beside the default user of no password (every key): the
// cost of the permission check per command.
func BenchmarkTakeACL(b *testing.B) {
	for _, tc := range []struct{ name, file, auth string }{
		{"default-allkeys", "", ""},
		{"acl-patterns", "user app on >pw ~other:* ~user:* +@limit", "*3\r\n$4\r\nAUTH\r\n$3\r\napp\r\n$2\r\npw\r\n"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			const pipeline = 16
			d := &countDecider{}
			cfg := Config{Decider: d}
			if tc.file != "" {
				l, err := acl.Parse("bench.acl", []byte(tc.file))
				if err != nil {
					b.Fatal(err)
				}
				cfg.Users = acl.NewHolder(l)
			}
			_, addr := start(b, cfg)
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			rd := bufio.NewReader(nc)
			if tc.auth != "" {
				if _, err := io.WriteString(nc, tc.auth); err != nil {
					b.Fatal(err)
				}
				if line, err := rd.ReadString('\n'); err != nil || line != "+OK\r\n" {
					b.Fatalf("AUTH: %q %v", line, err)
				}
			}
			req := strings.Repeat("*3\r\n$7\r\nRL.TAKE\r\n$8\r\nuser:123\r\n$1\r\n1\r\n", pipeline)
			const reply = "*6\r\n:1\r\n:100\r\n:99\r\n:-1\r\n:10\r\n$5\r\nstore\r\n"
			want := strings.Repeat(reply, pipeline)
			buf := make([]byte, len(want))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += pipeline {
				if _, err := io.WriteString(nc, req); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(rd, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if string(buf) != want {
				b.Fatalf("reply %q, want %q", buf, want)
			}
		})
	}
}
