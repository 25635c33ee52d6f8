package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	fake := newFake(1)
	tests := []struct {
		name string
		cfg  Config
		want string // substring of the error; "" for success
	}{
		{"defaults", Config{Decider: fake}, ""},
		{"no decider", Config{}, "Decider is required"},
		{"bad addr", Config{Decider: fake, Addr: "nope"}, "Config.Addr"},
		{"negative clients", Config{Decider: fake, MaxClients: -1}, "MaxClients"},
		{"tiny requests", Config{Decider: fake, MaxRequestBytes: 10}, "MaxRequestBytes"},
		{"key over request", Config{Decider: fake, MaxRequestBytes: 1000, MaxKeyBytes: 1000}, "MaxKeyBytes"},
		{"negative idle", Config{Decider: fake, IdleTimeout: -time.Second}, "IdleTimeout"},
		{"negative shutdown", Config{Decider: fake, ShutdownTimeout: -time.Second}, "ShutdownTimeout"},
		{"negative request timeout", Config{Decider: fake, RequestTimeout: -time.Second}, "RequestTimeout"},
		{"negative write timeout", Config{Decider: fake, WriteTimeout: -time.Second}, "WriteTimeout"},
		{"negative output", Config{Decider: fake, MaxOutputBytes: -1}, "MaxOutputBytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := New(tt.cfg)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				got := srv.cfg
				if got.Addr != DefaultAddr || got.MaxClients != DefaultMaxClients ||
					got.MaxRequestBytes != DefaultMaxRequestBytes || got.MaxKeyBytes != DefaultMaxKeyBytes ||
					got.ShutdownTimeout != DefaultShutdownTimeout || got.Version != "dev" ||
					got.RequestTimeout != DefaultRequestTimeout || got.WriteTimeout != DefaultWriteTimeout ||
					got.MaxOutputBytes != DefaultMaxOutputBytes || got.IdleTimeout != 0 {
					t.Errorf("defaults not applied: %+v", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New error = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestRateCommands(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{Decider: newFake(3)})
	rdb := client(t, addr)
	ctx := context.Background()
	tests := []struct {
		args []any
		want any // []any of the reply, int64, or an error text
	}{
		{[]any{"RL.TAKE", "k"}, []any{int64(1), int64(3), int64(2), int64(-1), int64(1000), "store"}},
		{[]any{"rl.take", "k", "2"}, []any{int64(1), int64(3), int64(0), int64(-1), int64(3000), "store"}},
		{[]any{"RL.TAKE", "k"}, []any{int64(0), int64(3), int64(0), int64(1000), int64(3000), "store"}},
		{[]any{"RL.PEEK", "k"}, []any{int64(0), int64(3), int64(0), int64(1000), int64(3000), "store"}},
		{[]any{"RL.TAKE", "k", "4"}, []any{int64(0), int64(3), int64(0), int64(-1), int64(3000), "store"}},
		{[]any{"RL.PEEK", "fresh", "3"}, []any{int64(1), int64(3), int64(3), int64(-1), int64(0), "store"}},
		{[]any{"RL.RESET", "k"}, int64(1)},
		{[]any{"RL.RESET", "k"}, int64(0)},
		{[]any{"RL.TAKE", "k"}, []any{int64(1), int64(3), int64(2), int64(-1), int64(1000), "store"}},
		{[]any{"RL.TAKE"}, "ERR wrong number of arguments for 'rl.take' command"},
		{[]any{"Rl.Peek", "k", "1", "x"}, "ERR wrong number of arguments for 'rl.peek' command"},
		{[]any{"RL.RESET"}, "ERR wrong number of arguments for 'rl.reset' command"},
		{[]any{"RL.TAKE", ""}, "ERR key must not be empty"},
		{[]any{"RL.RESET", ""}, "ERR key must not be empty"},
		{[]any{"RL.TAKE", strings.Repeat("k", 1025)}, "ERR key is too long (max 1024 bytes)"},
		{[]any{"RL.TAKE", strings.Repeat("k", 1024), "1"}, []any{int64(1), int64(3), int64(2), int64(-1), int64(1000), "store"}},
		{[]any{"RL.TAKE", "k", "0"}, "ERR cost must be a positive integer"},
		{[]any{"RL.TAKE", "k", "-1"}, "ERR cost must be a positive integer"},
		{[]any{"RL.TAKE", "k", "1.5"}, "ERR cost must be a positive integer"},
		{[]any{"RL.TAKE", "k", "+1"}, "ERR cost must be a positive integer"},
		{[]any{"RL.TAKE", "k", " 1"}, "ERR cost must be a positive integer"},
		{[]any{"RL.TAKE", "k", "1 "}, "ERR cost must be a positive integer"},
		{[]any{"RL.TAKE", "k", "one"}, "ERR cost must be a positive integer"},
		{[]any{"RL.TAKE", "k", ""}, "ERR cost must be a positive integer"},
		{[]any{"RL.TAKE", "k", "9223372036854775808"}, "ERR cost must be a positive integer"},
		{[]any{"RL.TAKE", "k", "99999999999999999999"}, "ERR cost must be a positive integer"},
		{[]any{"RL.PEEK", "k", "9223372036854775807"}, []any{int64(0), int64(3), int64(2), int64(-1), int64(1000), "store"}},
		{[]any{"RL.TAKE", "nopolicy:x"}, "ERR no policy matches key 'nopolicy:x'"},
		{[]any{"RL.TAKE", "nopolicy\r\nx"}, "ERR no policy matches key 'nopolicy  x'"},
		{[]any{"RL.TAKE", "fail"}, "ERR store said  no"},
		{[]any{"RL.RESET", "fail"}, "ERR reset failed"},
	}
	for _, tt := range tests {
		got, err := rdb.Do(ctx, tt.args...).Result()
		if want, ok := tt.want.(string); ok {
			if err == nil || err.Error() != want {
				t.Errorf("%q: got %v, %v; want error %q", tt.args, got, err, want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q = %#v, want %#v", tt.args, got, tt.want)
		}
	}
}

func TestConnectionCommands(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{Version: "1.2.3"})
	rdb := client(t, addr, func(o *redis.Options) { o.PoolSize = 1 })
	ctx := context.Background()
	tests := []struct {
		args []any
		want any // the reply, or an error text when isErr(want)
	}{
		{[]any{"PING"}, "PONG"},
		{[]any{"ping", "hi"}, "hi"},
		{[]any{"PING", "a", "b"}, "ERR wrong number of arguments for 'ping' command"},
		{[]any{"ECHO", "x y"}, "x y"},
		{[]any{"ECHO"}, "ERR wrong number of arguments for 'echo' command"},
		{[]any{"SELECT", "0"}, "OK"},
		{[]any{"SELECT", "1"}, "ERR DB index is out of range"},
		{[]any{"SELECT", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"HELLO", "4"}, "NOPROTO unsupported protocol version"},
		{[]any{"HELLO", "x"}, "ERR Protocol version is not an integer or out of range"},
		{[]any{"HELLO", "2", "FOO"}, "ERR Syntax error in HELLO option 'FOO'"},
		{[]any{"AUTH", "pw"}, string(errNoPassword)},
		{[]any{"AUTH", "default", "anything"}, "OK"},
		{[]any{"AUTH", "bob", "pw"}, "WRONGPASS invalid username-password pair or user is disabled."},
		{[]any{"AUTH", "a", "b", "c"}, "ERR syntax error"},
		{[]any{"CLIENT", "SETNAME", "worker-1"}, "OK"},
		{[]any{"CLIENT", "GETNAME"}, "worker-1"},
		{[]any{"CLIENT", "SETNAME", "a b"}, "ERR Client names cannot contain spaces, newlines or special characters."},
		{[]any{"CLIENT", "SETINFO", "LIB-NAME", "mylib"}, "OK"},
		{[]any{"CLIENT", "SETINFO", "lib-ver", "1 2"}, "ERR lib-ver cannot contain spaces, newlines or special characters."},
		{[]any{"CLIENT", "SETINFO", "color", "red"}, "ERR Unrecognized option 'color'"},
		{[]any{"CLIENT", "SETINFO", "LIB-VER"}, "ERR wrong number of arguments for 'client|setinfo' command"},
		{[]any{"CLIENT", "FOO"}, "ERR unknown subcommand 'FOO'. Try CLIENT HELP."},
		{[]any{"CLIENT"}, "ERR wrong number of arguments for 'client' command"},
		// go-redis speaks RESP3 (HELLO 3): CONFIG GET is a map.
		{[]any{"CONFIG", "GET", "save"}, map[any]any{"save": ""}},
		{[]any{"CONFIG", "GET", "appendonly"}, map[any]any{"appendonly": "no"}},
		{[]any{"CONFIG", "GET", "nosuch"}, map[any]any{}},
		{[]any{"CONFIG", "GET", "max*"}, map[any]any{"maxclients": "10000"}},
		// redis-cli and redis-benchmark spell them so: any case, globs,
		// several patterns.
		{[]any{"CONFIG", "GET", "*"}, map[any]any{"save": "", "appendonly": "no", "databases": "1", "maxclients": "10000", "timeout": "0"}},
		{[]any{"CONFIG", "GET", "SAVE", "AppendOnly"}, map[any]any{"save": "", "appendonly": "no"}},
		{[]any{"CONFIG", "GET", "?ave", "[ad]*", "*out"}, map[any]any{"save": "", "appendonly": "no", "databases": "1", "timeout": "0"}},
		{[]any{"CONFIG", "GET", "[^a-r]*"}, map[any]any{"save": "", "timeout": "0"}},
		{[]any{"CONFIG", "GET"}, "ERR wrong number of arguments for 'config|get' command"},
		{[]any{"CONFIG", "SET", "x", "y"}, "ERR unknown subcommand 'SET'. Try CONFIG HELP."},
		{[]any{"COMMAND", "COUNT"}, int64(len(newCommandTable()))},
		{[]any{"COMMAND", "DOCS", "nosuch"}, map[any]any{}},
		{[]any{"COMMAND", "INFO", "nosuch"}, []any{nil}},
		{[]any{"foo"}, "ERR unknown command 'foo', with args beginning with: "},
		{[]any{"foo", "a", "b"}, "ERR unknown command 'foo', with args beginning with: 'a' 'b' "},
		// Redis 7.0.15's exact text: arguments are cut at 128 bytes.
		{[]any{"foo", strings.Repeat("a", 100), strings.Repeat("b", 100), "c"},
			"ERR unknown command 'foo', with args beginning with: '" + strings.Repeat("a", 100) + "' '" + strings.Repeat("b", 25) + "' "},
		{[]any{strings.Repeat("x", 200), "y"}, "ERR unknown command '" + strings.Repeat("x", 128) + "', with args beginning with: 'y' "},
		{[]any{"foo", "a\r\nb"}, "ERR unknown command 'foo', with args beginning with: 'a  b' "},
		{[]any{"RESET"}, "RESET"},
		{[]any{"CLIENT", "GETNAME"}, nil},
	}
	for _, tt := range tests {
		got, err := rdb.Do(ctx, tt.args...).Result()
		if want, ok := tt.want.(string); ok && isErrText(want) {
			if err == nil || err.Error() != want {
				t.Errorf("%q: got %v, %v; want %q", tt.args, got, err, want)
			}
			continue
		}
		if tt.want == nil {
			if !errors.Is(err, redis.Nil) {
				t.Errorf("%q: got %v, %v; want nil", tt.args, got, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q = %#v, want %#v", tt.args, got, tt.want)
		}
	}
}

func TestHello(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{})
	r := dialRaw(t, addr)
	r.send("HELLO\r\n")
	got := r.readReply()
	want := "[$server $sluice $version $7.0.0 $proto :2 $id :1 $mode $standalone $role $master $modules []]"
	if got != want {
		t.Errorf("HELLO = %s\nwant    %s", got, want)
	}
	r.send("HELLO 2 SETNAME me\r\nCLIENT GETNAME\r\n")
	if got := r.readReply(); !strings.HasPrefix(got, "[$server $sluice") {
		t.Errorf("HELLO 2 SETNAME = %s", got)
	}
	if got := r.readReply(); got != "$me" {
		t.Errorf("CLIENT GETNAME after HELLO SETNAME = %s", got)
	}
}

// TestGoRedisHandshake checks go-redis's own start-up (HELLO 3, refused,
// then RESP2 and CLIENT SETINFO), with and without a password, RESP3 and
// RESP2 configured.
func TestGoRedisHandshake(t *testing.T) {
	t.Parallel()
	_, open := start(t, Config{})
	_, locked := start(t, Config{RequirePass: "s3cret"})
	tests := []struct {
		name string
		addr string
		opt  func(*redis.Options)
	}{
		{"resp3 default", open, func(*redis.Options) {}},
		{"resp2", open, func(o *redis.Options) { o.Protocol = 2; o.ClientName = "app" }},
		{"password resp3", locked, func(o *redis.Options) { o.Password = "s3cret" }},
		{"password resp2 named", locked, func(o *redis.Options) { o.Password = "s3cret"; o.Protocol = 2; o.ClientName = "app" }},
		{"user and password", locked, func(o *redis.Options) { o.Username = "default"; o.Password = "s3cret" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := client(t, tt.addr, tt.opt)
			ctx := context.Background()
			if err := rdb.Ping(ctx).Err(); err != nil {
				t.Fatalf("PING: %v", err)
			}
			info, err := rdb.Do(ctx, "CLIENT", "INFO").Text()
			if err != nil {
				t.Fatalf("CLIENT INFO: %v", err)
			}
			if !strings.Contains(info, "lib-name=go-redis") {
				t.Errorf("CLIENT SETINFO did not reach the server: %q", info)
			}
			res, err := rdb.Do(ctx, "RL.TAKE", "hs:"+tt.name).Slice()
			if err != nil || len(res) != 6 {
				t.Fatalf("RL.TAKE = %v, %v", res, err)
			}
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		rdb := client(t, locked, func(o *redis.Options) { o.Password = "nope" })
		err := rdb.Ping(context.Background()).Err()
		if err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Fatalf("PING with a wrong password: %v, want WRONGPASS", err)
		}
	})
}

func TestAuth(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{RequirePass: "s3cret"})
	r := dialRaw(t, addr)
	steps := []struct{ send, want string }{
		{"PING\r\n", "-NOAUTH Authentication required."},
		{"RL.TAKE k\r\n", "-NOAUTH Authentication required."},
		{"CLIENT ID\r\n", "-NOAUTH Authentication required."},
		{"foo\r\n", "-ERR unknown command 'foo', with args beginning with: "},
		{"RL.TAKE\r\n", "-ERR wrong number of arguments for 'rl.take' command"},
		{"HELLO\r\n", "-" + string(errHelloNoAuth)},
		{"HELLO 4 AUTH default s3cret\r\n", "-NOPROTO unsupported protocol version"},
		{"PING\r\n", "-NOAUTH Authentication required."},
		{"AUTH wrong\r\n", "-WRONGPASS invalid username-password pair or user is disabled."},
		{"AUTH bob s3cret\r\n", "-WRONGPASS invalid username-password pair or user is disabled."},
		{"HELLO 2 AUTH default wrong\r\n", "-WRONGPASS invalid username-password pair or user is disabled."},
		{"AUTH s3cret\r\n", "+OK"},
		{"PING\r\n", "+PONG"},
		{"RESET\r\n", "+RESET"},
		{"PING\r\n", "-NOAUTH Authentication required."},
		{"AUTH default s3cret\r\n", "+OK"},
		{"RL.TAKE k\r\n", "[:1 :10 :9 :-1 :1000 $store]"},
		{"RESET\r\n", "+RESET"},
		{"HELLO 2 AUTH default s3cret SETNAME n\r\n", "[$server $sluice $version $7.0.0 $proto :2 $id :1 $mode $standalone $role $master $modules []]"},
		{"CLIENT GETNAME\r\n", "$n"},
		{"RESET\r\n", "+RESET"},
		{"QUIT\r\n", "+OK"},
	}
	for _, s := range steps {
		r.send(s.send)
		if got := r.readReply(); got != s.want {
			t.Errorf("%q -> %s, want %s", s.send, got, s.want)
		}
	}
	r.expectClosed()
}

func TestInfo(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{Version: "9.9.9", MaxClients: 7})
	rdb := client(t, addr)
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	info, err := rdb.Info(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	for _, want := range []string{
		"# Server\r\n", "redis_version:7.0.0\r\n", "sluice_version:9.9.9\r\n", "tcp_port:" + port + "\r\n", "uptime_in_seconds:",
		"# Clients\r\n", "connected_clients:1\r\n", "maxclients:7\r\n",
		"# Stats\r\n", "total_connections_received:1\r\n", "total_commands_processed:", "rejected_connections:0\r\n", "panics:0\r\n",
	} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q:\n%s", want, info)
		}
	}
}

func TestInfoSections(t *testing.T) {
	t.Parallel()
	extra := func(w io.Writer) { fmt.Fprint(w, "# Limiter\r\npolicies:3\r\n") }
	_, addr := start(t, Config{Info: extra})
	rdb := client(t, addr)
	ctx := context.Background()
	tests := []struct {
		section []any
		has     []string
		hasNot  []string
	}{
		{nil, []string{"# Server", "# Clients", "# Stats", "# Limiter", "policies:3"}, nil},
		{[]any{"all"}, []string{"# Server", "# Limiter"}, nil},
		{[]any{"clients"}, []string{"# Clients", "connected_clients:"}, []string{"# Server", "# Limiter"}},
		{[]any{"LIMITER"}, []string{"# Limiter", "policies:3"}, []string{"# Server"}},
		{[]any{"server", "stats"}, []string{"# Server", "# Stats"}, []string{"# Clients"}},
		{[]any{"nosuch"}, nil, []string{"#"}},
	}
	for _, tt := range tests {
		got, err := rdb.Do(ctx, append([]any{"INFO"}, tt.section...)...).Text()
		if err != nil {
			t.Fatalf("INFO %v: %v", tt.section, err)
		}
		for _, h := range tt.has {
			if !strings.Contains(got, h) {
				t.Errorf("INFO %v lacks %q:\n%s", tt.section, h, got)
			}
		}
		for _, h := range tt.hasNot {
			if strings.Contains(got, h) {
				t.Errorf("INFO %v has %q:\n%s", tt.section, h, got)
			}
		}
	}
}

func TestCommandIntrospection(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{})
	rdb := client(t, addr)
	ctx := context.Background()
	infos, err := rdb.Command(ctx).Result()
	if err != nil {
		t.Fatalf("COMMAND: %v", err)
	}
	take, ok := infos["rl.take"]
	if !ok || take.Arity != -2 || take.FirstKeyPos != 1 || take.LastKeyPos != 1 || take.StepCount != 1 {
		t.Errorf("COMMAND rl.take = %+v", take)
	}
	n := len(newCommandTable())
	if len(infos) != n {
		t.Errorf("COMMAND lists %d commands, want %d", len(infos), n)
	}
	// go-redis speaks RESP3: COMMAND DOCS is a map of name to docs.
	docs, err := rdb.Do(ctx, "COMMAND", "DOCS", "rl.take", "client|setname").Result()
	if m, ok := docs.(map[any]any); err != nil || !ok || len(m) != 2 || m["rl.take"] == nil || m["client|setname"] == nil {
		t.Fatalf("COMMAND DOCS = %v, %v", docs, err)
	}
	all, err := rdb.Do(ctx, "COMMAND", "DOCS").Result()
	if m, ok := all.(map[any]any); err != nil || !ok || len(m) != n {
		t.Fatalf("COMMAND DOCS (all) = %d entries (%T), %v; want %d", len(m), all, err, n)
	}
	names, err := rdb.Do(ctx, "COMMAND", "LIST").StringSlice()
	if err != nil || len(names) != n {
		t.Fatalf("COMMAND LIST = %v, %v", names, err)
	}
	r := dialRaw(t, addr)
	r.send("COMMAND DOCS ping\r\n")
	want := "[$ping [$summary $Returns PONG, or the message. $since $1.0.0 $group $connection $complexity $O(1) $acl_categories [+@connection] $arguments [[$name $message $type $string $flags [+optional]]]]]"
	if got := r.readReply(); got != want {
		t.Errorf("COMMAND DOCS ping =\n%s\nwant\n%s", got, want)
	}
	r.send("COMMAND INFO rl.peek\r\n")
	want = "[[$rl.peek :-2 [+readonly +fast] :1 :1 :1 [+@limit] [] [] []]]"
	if got := r.readReply(); got != want {
		t.Errorf("COMMAND INFO rl.peek =\n%s\nwant\n%s", got, want)
	}
}

func TestClientList(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{})
	a := dialRaw(t, addr)
	b := dialRaw(t, addr)
	a.send("CLIENT SETNAME alpha\r\n")
	if got := a.readReply(); got != "+OK" {
		t.Fatal(got)
	}
	b.send("CLIENT LIST\r\n")
	got := b.readReply()
	if strings.Count(got, "\n") != 2 || !strings.Contains(got, "name=alpha") || !strings.Contains(got, "cmd=client|list") {
		t.Errorf("CLIENT LIST = %q", got)
	}
	b.send("CLIENT ID\r\nCLIENT INFO\r\n")
	id := b.readReply()
	if info := b.readReply(); !strings.HasPrefix(info, "$id="+id[1:]+" ") {
		t.Errorf("CLIENT ID = %s, CLIENT INFO = %q", id, info)
	}
}

// TestPipelineBatches checks that the RL.TAKEs of one go-redis pipeline
// reach the Decider as one batch, and that replies keep command order.
func TestPipelineBatches(t *testing.T) {
	t.Parallel()
	fake := newFake(10000)
	_, addr := start(t, Config{Decider: fake})
	rdb := client(t, addr)
	ctx := context.Background()
	const n = 50
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			p.Do(ctx, "RL.TAKE", "batch", i+1)
			if i%10 == 0 {
				p.Ping(ctx)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	used := int64(0)
	for _, cmd := range cmds {
		if cmd.Name() == "ping" {
			continue
		}
		res, err := cmd.(*redis.Cmd).Slice()
		if err != nil {
			t.Fatal(err)
		}
		used += int64(cmd.Args()[2].(int))
		if res[2] != 10000-used {
			t.Fatalf("replies out of order: remaining %v, want %d", res[2], 10000-used)
		}
	}
	if got := fake.maxBatch(); got < 2 {
		t.Errorf("largest Decide batch = %d, want the pipeline batched (> 1)", got)
	}
}

// TestResetIsABarrier checks that RL.RESET inside a pipeline keeps its
// place between the RL.TAKEs around it.
func TestResetIsABarrier(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{Decider: newFake(2)})
	r := dialRaw(t, addr)
	r.send("RL.TAKE k 2\r\nRL.TAKE k\r\nRL.RESET k\r\nRL.TAKE k\r\nRL.PEEK k\r\n")
	for _, want := range []string{
		"[:1 :2 :0 :-1 :2000 $store]",
		"[:0 :2 :0 :1000 :2000 $store]",
		":1",
		"[:1 :2 :1 :-1 :1000 $store]",
		"[:1 :2 :1 :-1 :1000 $store]",
	} {
		if got := r.readReply(); got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}

func TestQuitInPipeline(t *testing.T) {
	t.Parallel()
	fake := newFake(10)
	_, addr := start(t, Config{Decider: fake})
	r := dialRaw(t, addr)
	r.send("RL.TAKE q\r\nQUIT\r\nRL.TAKE q\r\n")
	if got := r.readReply(); got != "[:1 :10 :9 :-1 :1000 $store]" {
		t.Errorf("got %s", got)
	}
	if got := r.readReply(); got != "+OK" {
		t.Errorf("QUIT = %s", got)
	}
	r.expectClosed()
	if got := fake.takes.Load(); got != 1 {
		t.Errorf("Decider saw %d takes, want 1: nothing after QUIT runs", got)
	}
}

func TestMaxClients(t *testing.T) {
	t.Parallel()
	srv, addr := start(t, Config{MaxClients: 2})
	a := dialRaw(t, addr)
	b := dialRaw(t, addr)
	for _, r := range []*rawConn{a, b} {
		r.send("PING\r\n")
		if got := r.readReply(); got != "+PONG" {
			t.Fatalf("PING = %s", got)
		}
	}
	c := dialRaw(t, addr)
	if got := c.readReply(); got != "-ERR max number of clients reached" {
		t.Errorf("third client got %s", got)
	}
	c.expectClosed()
	if st := srv.Stats(); st.RejectedClients != 1 || st.ConnectedClients != 2 {
		t.Errorf("Stats = %+v, want 1 rejected, 2 connected", st)
	}
	a.nc.Close()
	waitFor(t, "a slot to free up", func() bool { return srv.Stats().ConnectedClients == 1 })
	d := dialRaw(t, addr)
	d.send("PING\r\n")
	if got := d.readReply(); got != "+PONG" {
		t.Errorf("client after a slot freed: %s", got)
	}
}

func TestPanicRecovered(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	srv, addr := start(t, Config{Logger: logger})
	r := dialRaw(t, addr)
	r.send("RL.TAKE panic\r\n")
	if got := r.readReply(); got != "-ERR internal error" {
		t.Errorf("panicking key: %s", got)
	}
	r.send("RL.TAKE fine\r\n")
	if got := r.readReply(); got != "[:1 :10 :9 :-1 :1000 $store]" {
		t.Errorf("next pipeline on the same connection: %s", got)
	}
	if st := srv.Stats(); st.Panics != 1 {
		t.Errorf("Stats.Panics = %d, want 1", st.Panics)
	}
	if out := logs.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "fake decider panics") || !strings.Contains(out, "goroutine") {
		t.Errorf("panic not logged with its stack:\n%s", out)
	}
}

func TestShutdownWaitsForInFlight(t *testing.T) {
	t.Parallel()
	fake := newFake(10)
	fake.entered = make(chan struct{}, 1)
	fake.release = make(chan struct{})
	srv, err := New(Config{Decider: fake})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	r := dialRaw(t, ln.Addr().String())
	r.send("RL.TAKE slow\r\n")
	<-fake.entered

	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	waitFor(t, "the listener to close", func() bool {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v before the in-flight command finished", err)
	default:
	}
	close(fake.release)
	if got := r.readReply(); got != "[:1 :10 :9 :-1 :1000 $store]" {
		t.Errorf("in-flight RL.TAKE = %s", got)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	r.expectClosed()
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve = %v, want ErrServerClosed", err)
	}
}

func TestShutdownGivesUp(t *testing.T) {
	t.Parallel()
	fake := newFake(10)
	fake.entered = make(chan struct{}, 1)
	fake.release = make(chan struct{})
	defer close(fake.release)
	srv, err := New(Config{Decider: fake})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	r := dialRaw(t, ln.Addr().String())
	r.send("RL.TAKE slow\r\n")
	<-fake.entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want DeadlineExceeded", err)
	}
	// The Decider's context was cancelled, so the command ends with it.
	r.expectClosed()
}

func TestServeAfterShutdown(t *testing.T) {
	t.Parallel()
	srv, err := New(Config{Decider: newFake(1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(ln); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve after Shutdown = %v", err)
	}
}

func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{IdleTimeout: 100 * time.Millisecond})
	r := dialRaw(t, addr)
	r.send("PING\r\n")
	if got := r.readReply(); got != "+PONG" {
		t.Fatal(got)
	}
	r.expectClosed()
}

func TestStats(t *testing.T) {
	t.Parallel()
	srv, addr := start(t, Config{})
	r := dialRaw(t, addr)
	r.send("PING\r\nRL.TAKE k\r\nfoo\r\n")
	for range 3 {
		r.readReply()
	}
	st := srv.Stats()
	want := Stats{ConnectedClients: 1, TotalConnections: 1, CommandsProcessed: 3, ErrorReplies: 1}
	if st != want {
		t.Errorf("Stats = %+v, want %+v", st, want)
	}
}

func TestConcurrentClients(t *testing.T) {
	t.Parallel()
	fake := newFake(1 << 40)
	_, addr := start(t, Config{Decider: fake})
	rdb := client(t, addr, func(o *redis.Options) { o.PoolSize = 8 })
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				if _, err := rdb.Do(ctx, "RL.TAKE", fmt.Sprintf("c%d", g), 1).Slice(); err != nil {
					t.Errorf("RL.TAKE %d/%d: %v", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := fake.takes.Load(); got != 800 {
		t.Errorf("takes = %d, want 800", got)
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var _ Decider = (*fakeDecider)(nil)

// isErrText tells the error texts of a table from plain replies: every
// error starts with an all-caps code and a space.
func isErrText(s string) bool {
	code, _, ok := strings.Cut(s, " ")
	return ok && strings.ToUpper(code) == code && strings.Trim(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == ""
}
