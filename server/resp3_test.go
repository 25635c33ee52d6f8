package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// helloMap is the start of HELLO's reply in RESP3, up to the connection id.
const helloMap = "%{$server $sluice $version $7.0.0 $proto :3 $id :"

// TestRESP3Hello: HELLO 3 AUTH authenticates and switches the connection
// to RESP3 (a map, nulls as _), a refused HELLO changes nothing, HELLO 2
// and RESET go back, HELLO 4 is NOPROTO, and the protocol of each reply of
// a pipeline is the one in force when its command ran.
func TestRESP3Hello(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{Users: testUsers(t, testACL)})
	r := dialRaw(t, addr)
	runSteps(t, r, []step{
		{"HELLO 3\r\n", "-" + string(errHelloNoAuth)},
		{"HELLO 3 AUTH acme beta-pw\r\n", wrongPass},
		{"ACL WHOAMI\r\n", noAuth},
		{"HELLO 3 AUTH acme acme-pw SETNAME bad\x01name\r\n", "-" + string(errClientName)},
		{"ACL WHOAMI\r\n", noAuth}, // a bad SETNAME refuses the HELLO before AUTH, as Redis
		{"HELLO 3 AUTH acme acme-pw\r\n", "~" + helloMap},
		{"ACL WHOAMI\r\n", "$acme"},
		{"CLIENT GETNAME\r\n", "_"},
		{"CLIENT INFO\r\n", "~ resp=3\n"},
		{"RL.TAKE acme:x 3\r\n", "[:1 :10 :7 :-1 :3000 $store]"},
		{"RL.TAKE acme:x 3 RECEIPT\r\n", "~[:1 :10 :4 :-1 :6000 $store $"},
		{"HELLO\r\n", "~" + helloMap},
		{"HELLO 4\r\n", "-NOPROTO unsupported protocol version"},
		{"HELLO 1\r\n", "-NOPROTO unsupported protocol version"},
		{"HELLO x\r\n", "-" + string(errProtoVersion)},
		{"CLIENT GETNAME\r\n", "_"},
		{"HELLO 3 AUTH acme wrong\r\n", wrongPass},
		{"ACL WHOAMI\r\n", "$acme"}, // a refused AUTH leaves the user and the protocol
		{"CLIENT GETNAME\r\n", "_"},
		{"HELLO 2\r\n", "~[$server $sluice $version $7.0.0 $proto :2 $id :"},
		{"CLIENT GETNAME\r\n", "$nil"},
		{"CLIENT INFO\r\n", "~ resp=2\n"},
		// One pipeline: each reply in the protocol its command left.
		{"CLIENT GETNAME\r\nHELLO 3 SETNAME w\r\nCLIENT GETNAME\r\nCLIENT SETNAME \"\"\r\nCLIENT GETNAME\r\nHELLO 2\r\nCLIENT GETNAME\r\n", "$nil"},
		{"", "~" + helloMap},
		{"", "$w"},
		{"", "+OK"},
		{"", "_"},
		{"", "~[$server"},
		{"", "$nil"},
		{"HELLO 3\r\n", "~" + helloMap},
		{"RESET\r\n", "+RESET"},
		{"AUTH acme acme-pw\r\n", "+OK"},
		{"CLIENT GETNAME\r\n", "$nil"},
		{"CLIENT INFO\r\n", "~ resp=2\n"},
	})
}

// TestRESP3Maps: after HELLO 3 the replies that are maps in Redis are
// RESP3 maps (CONFIG GET, COMMAND DOCS, ACL LOG entries) and sets where
// Redis sends sets (COMMAND INFO's flags, categories, tips, key specs);
// sluice's own replies are the same arrays in both protocols; and in RESP2
// every one of them is the flat array it always was.
func TestRESP3Maps(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{Users: testUsers(t, testACL), MaxClients: 7,
		HotKeys: func() []HotKey {
			return []HotKey{{Key: "acme:hot", Policy: "api", Mode: "lease", Rate: 5230, Since: time.UnixMilli(1764500000000)}}
		}})
	beta := dialRaw(t, addr)
	runSteps(t, beta, []step{
		{"AUTH beta beta-pw\r\n", "+OK"},
		{"RL.TAKE acme:x\r\n", noPermKey}, // for ACL LOG
	})
	tests := []struct {
		send         string
		resp2, resp3 string // "~" + a part of the reply
	}{
		{"CONFIG GET maxclients\r\n", "[$maxclients $7]", "%{$maxclients $7}"},
		{"CONFIG GET nosuch\r\n", "[]", "%{}"},
		{"COMMAND DOCS rl.take\r\n", "~[$rl.take [$summary $", "~%{$rl.take %{$summary $"},
		{"COMMAND DOCS rl.take\r\n", "~ $arguments [[$name $key $type $key] [$name $cost $type $integer $flags [+optional]]", "~ $arguments [%{$name $key $type $key} %{$name $cost $type $integer $flags ~[+optional]}"},
		{"COMMAND DOCS client\r\n", "~ $subcommands [$client|getname [$summary", "~ $subcommands %{$client|getname %{$summary"},
		{"COMMAND DOCS nosuch\r\n", "[]", "%{}"},
		{"COMMAND INFO rl.take nosuch\r\n", "[[$rl.take :-2 [+write +fast] :1 :1 :1 [+@limit] [] [] []] $nil]", "[[$rl.take :-2 ~[+write +fast] :1 :1 :1 ~[+@limit] ~[] ~[] ~[]] _]"},
		{"COMMAND INFO client\r\n", "~[[$client :-2 [] :0 :0 :0 [] [] [] [[$client|getname", "~[[$client :-2 ~[] :0 :0 :0 ~[] ~[] ~[] [[$client|getname"},
		{"ACL LOG 1\r\n", "~[[$count :1 $reason $key $context $toplevel $object $acme:x $username $beta $age-seconds", "~[%{$count :1 $reason $key $context $toplevel $object $acme:x $username $beta $age-seconds"},
		{"RL.HOTKEYS\r\n", "[[$key $acme:hot $policy $api $mode $lease $rate $5230 $since_ms :1764500000000]]", "[[$key $acme:hot $policy $api $mode $lease $rate $5230 $since_ms :1764500000000]]"},
		{"RL.POLICY LIST\r\n", "-" + string(errNoPolicyAdmin), "-" + string(errNoPolicyAdmin)},
	}
	for _, proto := range []string{"2", "3"} {
		r := dialRaw(t, addr)
		runSteps(t, r, []step{{"HELLO " + proto + " AUTH ops ops-pw\r\n", "~$proto :" + proto}})
		for _, tt := range tests {
			want := tt.resp2
			if proto == "3" {
				want = tt.resp3
			}
			runSteps(t, r, []step{{tt.send, want}})
		}
	}
}

// TestRESP3GoRedis: go-redis with Protocol 3 and Username speaks RESP3 to
// sluice (HELLO 3 AUTH no longer falls back): CONFIG GET comes back a map,
// CLIENT INFO says resp=3, its typed commands and RL.TAKE work.
func TestRESP3GoRedis(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{Users: testUsers(t, testACL)})
	ctx := context.Background()
	rdb := client(t, addr, func(o *redis.Options) { o.Protocol = 3; o.Username = "ops"; o.Password = "ops-pw" })
	info, err := rdb.ClientInfo(ctx).Result()
	if err != nil {
		t.Fatalf("CLIENT INFO: %v", err)
	}
	if info.Resp != 3 || info.User != "ops" || !strings.HasPrefix(info.LibName, "go-redis") {
		t.Errorf("CLIENT INFO: resp=%d user=%s lib-name=%s, want 3 ops go-redis", info.Resp, info.User, info.LibName)
	}
	raw, err := rdb.Do(ctx, "CONFIG", "GET", "databases").Result()
	if got, ok := raw.(map[any]any); err != nil || !ok || got["databases"] != "1" {
		t.Errorf("CONFIG GET databases = %#v, %v; want the map {databases: 1}", raw, err)
	}
	if got, err := rdb.ConfigGet(ctx, "databases").Result(); err != nil || got["databases"] != "1" {
		t.Errorf("ConfigGet = %v, %v", got, err)
	}
	if got, err := rdb.Do(ctx, "RL.TAKE", "acme:go", 2).Slice(); err != nil || len(got) != 6 || got[2] != int64(8) {
		t.Errorf("RL.TAKE = %v, %v; want six fields, 8 left", got, err)
	}
	if got, err := rdb.ClientGetName(ctx).Result(); err != redis.Nil {
		t.Errorf("CLIENT GETNAME = %q, %v; want redis.Nil", got, err)
	}
	docs, err := rdb.Do(ctx, "COMMAND", "DOCS", "rl.take").Result()
	if m, ok := docs.(map[any]any); err != nil || !ok || m["rl.take"] == nil {
		t.Errorf("COMMAND DOCS rl.take = %#v, %v; want a map of rl.take", docs, err)
	}
}

// BenchmarkTakeRESP3 is BenchmarkTake's pipeline of 16 on a connection
// that sent HELLO 3 beside one that did not (the RL.TAKE reply is the same
// bytes in both), then go-redis's Do of one RL.TAKE with Protocol 2 and 3:
// what an application's go-redis (which defaults to 3 and used to fall
// back to 2) pays per call now that sluice answers HELLO 3. ns/op and
// allocs/op are per command, server and client together.
func BenchmarkTakeRESP3(b *testing.B) {
	const pipeline = 16
	for _, proto := range []int{2, 3} {
		b.Run(fmt.Sprintf("raw/resp%d", proto), func(b *testing.B) {
			d := &countDecider{}
			_, addr := start(b, Config{Decider: d})
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			rd := bufio.NewReader(nc)
			if _, err := fmt.Fprintf(nc, "HELLO %d\r\n", proto); err != nil {
				b.Fatal(err)
			}
			hello, err := readRESP(rd)
			if err != nil || !strings.Contains(hello, fmt.Sprintf("$proto :%d", proto)) {
				b.Fatalf("HELLO %d = %s, %v", proto, hello, err)
			}
			req := strings.Repeat("*3\r\n$7\r\nRL.TAKE\r\n$8\r\nuser:123\r\n$1\r\n1\r\n", pipeline)
			want := strings.Repeat("*6\r\n:1\r\n:100\r\n:99\r\n:-1\r\n:10\r\n$5\r\nstore\r\n", pipeline)
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
	for _, proto := range []int{2, 3} {
		b.Run(fmt.Sprintf("go-redis/resp%d", proto), func(b *testing.B) {
			d := &countDecider{}
			_, addr := start(b, Config{Decider: d})
			rdb := client(b, addr, func(o *redis.Options) { o.Protocol = proto; o.PoolSize = 1 })
			ctx := context.Background()
			if info, err := rdb.ClientInfo(ctx).Result(); err != nil || info.Resp != proto {
				b.Fatalf("CLIENT INFO = %+v, %v; want resp %d", info, err, proto)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := rdb.Do(ctx, "RL.TAKE", "user:123").Err(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if d.n.Load() != int64(b.N) {
				b.Fatalf("Decider saw %d takes, want %d", d.n.Load(), b.N)
			}
		})
	}
}
