package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// argsEcho is a script that answers, for each of its ARGV, the length and
// the sum of the bytes redis-server parsed: what the writer sent, as Redis
// read it.
const argsEcho = `local r = {}
for _, a in ipairs(ARGV) do
  local s = 0
  for i = 1, #a do s = s + string.byte(a, i) end
  r[#r+1] = #a
  r[#r+1] = s
end
return r`

func sumBytes(s string) int64 {
	var n int64
	for i := 0; i < len(s); i++ {
		n += int64(s[i])
	}
	return n
}

func dialTestLean(t *testing.T, o *redis.Options) *leanConn {
	t.Helper()
	c, err := dialLean(t.Context(), o, time.Now().Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	return c
}

// roundTrip writes cmds in one pipeline on c and reads one reply each,
// as readInts reads it.
func roundTrip(t *testing.T, c *leanConn, cmds ...[]any) (vals [][]int64, errs []error) {
	t.Helper()
	for _, a := range cmds {
		var err error
		if c.buf, err = appendCommand(c.buf, a); err != nil {
			t.Fatal(err)
		}
	}
	d := time.Now().Add(10 * time.Second)
	if err := c.write(d); err != nil {
		t.Fatal(err)
	}
	c.setReadDeadline(d)
	for range cmds {
		v, err := readInts(c.r, nil)
		vals, errs = append(vals, v), append(errs, err)
	}
	return vals, errs
}

// The writer's commands, pipelined, are parsed by redis-server as meant:
// every argument type the store sends (and the ones appendArg accepts),
// byte for byte, with CRLF, NUL and 8-bit bytes inside, an empty argument
// and a long one.
func TestLeanWriterThroughRedis(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	c := dialTestLean(t, &redis.Options{Addr: n.Addr, Network: "tcp"})
	args := []any{"plain", "", "a\r\nb", "\x00\xff\x80", strings.Repeat("k", 70_000), []byte("bytes\r\n"),
		0, -1, 42, int64(math.MaxInt64), int64(math.MinInt64), int32(-7), int8(-8), uint8(255), uint16(65535), uint32(1 << 31),
		uint(7), uint64(math.MaxUint64), 1.5, -0.25, float32(0.1), math.Inf(1), true, false, nil, 3 * time.Millisecond}
	want := []string{"plain", "", "a\r\nb", "\x00\xff\x80", strings.Repeat("k", 70_000), "bytes\r\n",
		"0", "-1", "42", "9223372036854775807", "-9223372036854775808", "-7", "-8", "255", "65535", "2147483648",
		"7", "18446744073709551615", "1.5", "-0.25", "0.10000000149011612", "+Inf", "1", "0", "", "3000000"}
	cmd := append([]any{"eval", argsEcho, 0}, args...)
	const copies = 5 // one pipeline of five commands
	cmds := make([][]any, copies)
	for i := range cmds {
		cmds[i] = cmd
	}
	vals, errs := roundTrip(t, c, cmds...)
	for i := range copies {
		if errs[i] != nil {
			t.Fatalf("command %d: %v", i, errs[i])
		}
		if got := len(vals[i]); got != 2*len(want) {
			t.Fatalf("command %d: %d integers, want %d", i, got, 2*len(want))
		}
		for j, w := range want {
			if got := vals[i][2*j : 2*j+2]; got[0] != int64(len(w)) || got[1] != sumBytes(w) {
				t.Errorf("command %d, argument %d (%T %v): redis-server read length %d, byte sum %d; want %d, %d",
					i, j, args[j], args[j], got[0], got[1], len(w), sumBytes(w))
			}
		}
	}
	// an argument of a type it does not send is an error, nothing written
	before := len(c.buf)
	if _, err := appendCommand(c.buf, []any{"eval", struct{}{}}); err == nil || len(c.buf) != before {
		t.Errorf("appendCommand of a struct: %v, buffer %d → %d bytes; want an error and nothing appended", err, before, len(c.buf))
	}
}

// Error replies read from a real redis-server keep their whole text and
// are classified as go-redis's are: NOSCRIPT retried, MOVED and ASK with
// their address, CLUSTERDOWN, TRYAGAIN, LOADING and READONLY connectivity,
// a script's own error a bug to surface; WAIT's integer; a reply of
// another shape a protocol error.
func TestLeanRepliesFromRedis(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	c := dialTestLean(t, &redis.Options{Addr: n.Addr, Network: "tcp"})
	errReply := func(msg string) []any {
		return []any{"eval", "return redis.error_reply(ARGV[1])", 0, msg}
	}
	vals, errs := roundTrip(t, c,
		[]any{"evalsha", strings.Repeat("0", 40), 0},
		errReply("MOVED 3999 127.0.0.1:6381"),
		errReply("ASK 3999 127.0.0.1:6382"),
		errReply("CLUSTERDOWN The cluster is down"),
		errReply("TRYAGAIN Multiple keys request during rehashing of slot"),
		errReply("LOADING Redis is loading the dataset in memory"),
		errReply("READONLY You can't write against a read only replica."),
		[]any{"eval", "return {1, -2, 4503599627370496}", 0}, // Lua numbers are doubles: 2^52 is exact
		[]any{"eval", "return {}", 0},
		[]any{"eval", "error('boom')", 0},
	)
	if !redis.HasErrorPrefix(errs[0], "NOSCRIPT") {
		t.Errorf("EVALSHA of an unknown script: %v, want NOSCRIPT", errs[0])
	}
	if addr, ok := redis.IsMovedError(errs[1]); !ok || addr != "127.0.0.1:6381" {
		t.Errorf("MOVED: IsMovedError(%v) = %q, %v", errs[1], addr, ok)
	}
	if addr, ok := redis.IsAskError(errs[2]); !ok || addr != "127.0.0.1:6382" {
		t.Errorf("ASK: IsAskError(%v) = %q, %v", errs[2], addr, ok)
	}
	for i := 3; i <= 6; i++ {
		if !isRedisReply(errs[i]) || !isConnectivity(errs[i]) {
			t.Errorf("reply %d %q: error reply %v, connectivity %v; want both", i, errs[i], isRedisReply(errs[i]), isConnectivity(errs[i]))
		}
	}
	if errs[7] != nil || !slicesEqual(vals[7], []int64{1, -2, 1 << 52}) {
		t.Errorf("array of integers: %v, %v", vals[7], errs[7])
	}
	if errs[8] != nil || len(vals[8]) != 0 {
		t.Errorf("empty array: %v, %v", vals[8], errs[8])
	}
	if !isRedisReply(errs[9]) || isConnectivity(errs[9]) || !strings.Contains(errs[9].Error(), "boom") {
		t.Errorf("a script's error: %v, want an error reply (not connectivity) naming it", errs[9])
	}

	c.buf, _ = appendCommand(c.buf, []any{"wait", 0, 0})
	if err := c.write(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, err := readInt(c.r); err != nil || got != 0 {
		t.Errorf("WAIT 0 0 without replicas: %d, %v; want 0", got, err)
	}

	_, errs = roundTrip(t, c, []any{"eval", "return 'text'", 0})
	if !errors.Is(errs[0], errProtocol) {
		t.Errorf("a bulk string where integers were expected: %v, want a protocol error", errs[0])
	}
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The store's pipelines go on lean connections, and a user of Redis's
// ACL is authenticated on them: AUTH with the username. A wrong password
// is an error reply that names it — a bad config to surface, never
// on_store_error.
func TestLeanAuthUser(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	ctx := t.Context()
	side := redis.NewClient(&redis.Options{Addr: n.Addr})
	if err := side.Do(ctx, "acl", "setuser", "lean", "on", ">lean-pw-1", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	_ = side.Do(ctx, "acl", "setuser", "default", "off").Err() // closes side's own connection
	_ = side.Close()
	p := &limit.Policy{Limit: 10, Rate: 1, Period: time.Hour}

	s, err := New(Config{URL: "redis://" + n.Addr, Username: "lean", Password: "lean-pw-1", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.lean {
		t.Fatal("the store's pipelines are not lean")
	}
	if r := takeN(ctx, s, p, "auth:k")[0]; r.Err != nil || !r.Allowed || r.Remaining != 9 {
		t.Fatalf("take as the ACL user: %+v", r)
	}
	opened := 0
	s.leans.Range(func(_, _ any) bool { opened++; return true })
	if opened == 0 {
		t.Error("no lean connection open after a take")
	}

	bad, err := New(Config{URL: "redis://" + n.Addr, Username: "lean", Password: "wrong", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	r := takeN(ctx, bad, p, "auth:k")[0]
	if r.Err == nil || errors.Is(r.Err, limit.ErrUnavailable) || !strings.Contains(r.Err.Error(), "WRONGPASS") {
		t.Errorf("take with a wrong password: %v; want an error naming WRONGPASS, not unavailable", r.Err)
	}
}

// A pipeline whose read timed out closes its lean connection: the reply
// that comes late (here, from a node paused past the deadline and then
// resumed) is never read as the next pipeline's. The next take, of
// another key under another policy, gets its own answer on a new
// connection.
func TestLeanTimeoutNeverReadsALateReply(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	s, err := New(Config{URL: "redis://" + n.Addr, Timeout: 200 * time.Millisecond, Pipelines: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	small := &limit.Policy{Limit: 10, Rate: 1, Period: time.Hour}
	big := &limit.Policy{Limit: 1000, Rate: 1, Period: time.Hour}
	if r := takeN(ctx, s, small, "late:warm")[0]; r.Err != nil { // the slot's connection is open
		t.Fatal(r.Err)
	}
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	r := takeN(tctx, s, small, "late:first")[0]
	cancel()
	// The pipeline waits Timeout at least; resume once it has given up.
	q, err := s.queue(n.Addr)
	if err != nil {
		t.Fatal(err)
	}
	for len(q.slots) == 0 {
		time.Sleep(time.Millisecond) // polling the slot's return, not a wait for time
	}
	if err := n.Resume(); err != nil {
		t.Fatal(err)
	}
	if r.Err == nil {
		t.Fatalf("take while the node was paused: %+v, want a failure", r)
	}
	got := takeN(ctx, s, big, "late:second")[0]
	if got.Err != nil || !got.Allowed || got.Limit != 1000 || got.Remaining != 999 {
		t.Errorf("take after the timeout: %+v; want its own answer (limit 1000, remaining 999), not the late reply of the first", got)
	}
}

// readAll parses replies from data until it ends or fails, in every shape
// the reader knows, and returns what it read.
func readAll(data []byte, shape byte) (ints [][]int64, errs []error) {
	r := bufio.NewReaderSize(bytes.NewReader(data), 64)
	for range 64 {
		var v []int64
		var err error
		switch shape % 4 {
		case 0:
			v, err = readInts(r, nil)
		case 1:
			var x int64
			x, err = readInt(r)
			v = []int64{x}
		case 2:
			err = readStatus(r)
		default:
			_, err = readBulk(r) // FUNCTION LOAD's library name
		}
		if err != nil && !isRedisReply(err) {
			return ints, append(errs, err)
		}
		ints, errs = append(ints, v), append(errs, err)
	}
	return ints, errs
}

// encodeInts is a reply of integers in RESP, as Redis writes it.
func encodeInts(v []int64) []byte {
	b := []byte("*" + strconv.Itoa(len(v)) + "\r\n")
	for _, x := range v {
		b = append(b, ':')
		b = strconv.AppendInt(b, x, 10)
		b = append(b, '\r', '\n')
	}
	return b
}

// FuzzReplyParser: the reply reader never panics, never allocates past
// its bounds on any input, and reads back what Redis would have written
// for the integers it parsed.
func FuzzReplyParser(f *testing.F) {
	for _, s := range []string{
		"*2\r\n:1\r\n:-2\r\n", ":9223372036854775807\r\n", ":-9223372036854775808\r\n", "-NOSCRIPT No matching script\r\n",
		"-MOVED 3999 127.0.0.1:6381\r\n", "+OK\r\n", "*0\r\n", "*-1\r\n", "$4\r\ntext\r\n", "*1048577\r\n", "*3\r\n:1\r\n-ERR x\r\n:2\r\n",
		":99999999999999999999\r\n", "*2\r\n:1\n", "\r\n", "*1\r\n*1\r\n:1\r\n", strings.Repeat("-", 200) + "\r\n",
	} {
		f.Add([]byte(s), byte(0))
		f.Add([]byte(s), byte(1))
		f.Add([]byte(s), byte(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, shape byte) {
		ints, errs := readAll(data, shape)
		if shape%4 != 0 {
			return
		}
		for i, v := range ints {
			if errs[i] != nil {
				continue
			}
			again, errs2 := readAll(encodeInts(v), 0)
			if len(again) < 1 || errs2[0] != nil || !slicesEqual(again[0], v) {
				t.Fatalf("reply %d read as %v; its encoding read back as %v, %v", i, v, again, errs2)
			}
		}
	})
}

func TestParseInt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"-0", 0, true}, {"42", 42, true}, {"-42", -42, true},
		{"9223372036854775807", math.MaxInt64, true}, {"-9223372036854775808", math.MinInt64, true},
		{"9223372036854775808", 0, false}, {"-9223372036854775809", 0, false}, {"99999999999999999999", 0, false},
		{"", 0, false}, {"-", 0, false}, {"+1", 0, false}, {"1 ", 0, false}, {"0x1", 0, false},
	} {
		got, ok := parseInt([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseInt(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// Store.Close closes the lean connections: the node sees its clients go.
func TestLeanCloseClosesConnections(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	ctx := t.Context()
	side := redis.NewClient(&redis.Options{Addr: n.Addr})
	defer side.Close()
	clients := func() int {
		t.Helper()
		list, err := side.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(list, "\n")
	}
	before := clients()
	s, err := New(Config{URL: "redis://" + n.Addr, Timeout: 5 * time.Second, Pipelines: 2})
	if err != nil {
		t.Fatal(err)
	}
	p := &limit.Policy{Limit: 10, Rate: 1, Period: time.Hour}
	if r := takeN(ctx, s, p, "close:k")[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := clients(); got <= before {
		t.Fatalf("%d clients with the store open, %d before: the take opened no connection", got, before)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for clients() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d clients 10s after Close, %d before the store: a connection was left open", clients(), before)
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
}

// TestReadBulk reads FUNCTION LOAD's reply shapes: the library's name, an
// error reply (the connection still in step), and what is not a short bulk
// string (a protocol error).
func TestReadBulk(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		reply    bool // an error reply
		bad      bool // a protocol error
	}{
		{in: "$19\r\nsluice_0123456789ab\r\n", want: "sluice_0123456789ab"},
		{in: "$0\r\n\r\n", want: ""},
		{in: "-ERR Library 'x' already exists\r\n", reply: true},
		{in: ":1\r\n", bad: true},
		{in: "$-1\r\n", bad: true},
		{in: "$513\r\n" + strings.Repeat("x", 513) + "\r\n", bad: true},
		{in: "$3\r\nabcd\r\n", bad: true},
	} {
		got, err := readBulk(bufio.NewReader(strings.NewReader(tc.in)))
		switch {
		case tc.reply && !isRedisReply(err), tc.bad && (err == nil || isRedisReply(err)), !tc.reply && !tc.bad && (err != nil || got != tc.want):
			t.Errorf("readBulk(%q) = %q, %v; want %q (error reply %v, protocol error %v)", tc.in, got, err, tc.want, tc.reply, tc.bad)
		}
	}
}
