package server

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"
)

func TestScanner(t *testing.T) {
	t.Parallel()
	const max = 256
	tests := []struct {
		name     string
		in       string
		boundary int    // last request boundary
		bad      string // error text, "" for none
	}{
		{"one multibulk", "*1\r\n$4\r\nPING\r\n", 14, ""},
		{"two and a partial", "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPI", 28, ""},
		{"inline", "PING\r\nPING\n", 11, ""},
		{"empty lines", "\r\n\n", 3, ""},
		{"empty bulk", "*1\r\n$0\r\n\r\n", 10, ""},
		{"partial inline", "PIN", 0, ""},
		{"zero count", "*0\r\n", 0, errProtoMultiBulk},
		{"negative count", "*-1\r\n", 0, errProtoMultiBulk},
		{"signed count", "*+1\r\n", 0, errProtoMultiBulk},
		{"count without digits", "*\r\n", 0, errProtoMultiBulk},
		{"count without LF", "*1\rX", 0, errProtoMultiBulk},
		{"no dollar", "*1\r\n:1\r\n", 0, errProtoExpected + ":'"},
		{"no dollar, binary", "*1\r\n\x00", 0, errProtoExpected + "?'"},
		{"bad bulk length", "*1\r\n$x\r\n", 0, errProtoBulk},
		{"negative bulk", "*1\r\n$-1\r\n", 0, errProtoBulk},
		{"bulk too long for its data", "*1\r\n$3\r\nabcd\r\n", 0, errProtoBulk},
		{"bulk without CRLF", "*1\r\n$1\r\nab", 0, errProtoBulk},
		{"good then bad", "PING\r\n*1\r\n$1\r\nxy", 6, errProtoBulk},
		{"huge claimed bulk", "*1\r\n$999999999\r\n", 0, errProtoTooLarge},
		{"bulk just over", "*1\r\n$" + "245" + "\r\n", 0, errProtoTooLarge},
		{"bulk just fits", "*1\r\n$244\r\n" + strings.Repeat("a", 244) + "\r\n", 256, ""},
		{"huge count", "*1000000\r\n", 0, errProtoTooLarge},
		{"huge count, leading zeros", "*002222222200000000001\r\n", 0, errProtoTooLarge},
		{"long inline", strings.Repeat("a", 300), 0, errProtoTooLarge},
		{"inline just fits", strings.Repeat("a", 255) + "\n", 256, ""},
		{"inline of separators", strings.Repeat("a ", 100), 0, errProtoTooLarge},
		{"a few separators", "RL.TAKE \"my key\" 1\r\n", 20, ""},
		{"good then huge", "PING\r\n*1\r\n$999999999\r\n", 6, errProtoTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Whole, then byte by byte: the state must carry across reads.
			boundary, bad, _ := feedWhole(max, tt.in)
			if boundary != tt.boundary || bad != tt.bad {
				t.Errorf("feed = %d, %q; want %d, %q", boundary, bad, tt.boundary, tt.bad)
			}
			last, gotBad, _ := feedBytes(max, tt.in)
			if last != tt.boundary || gotBad != tt.bad {
				t.Errorf("byte by byte = %d, %q; want %d, %q", last, gotBad, tt.boundary, tt.bad)
			}
		})
	}
}

// feedWhole feeds in to a scanner in one read and returns what it
// returned and the commands it completed.
func feedWhole(max int, in string) (boundary int, bad string, cmds [][]string) {
	s := scanner{max: max}
	boundary, bad = s.feed([]byte(in), 0)
	return boundary, bad, scanned(&s)
}

// feedBytes feeds in to a scanner a byte at a time, as reads appended to
// one buffer, which never takes the fast path for whole requests, and
// returns the last boundary, the error and the commands completed.
func feedBytes(max int, in string) (last int, bad string, cmds [][]string) {
	s := scanner{max: max}
	buf := []byte(in)
	for i := range len(buf) {
		b, bad := s.feed(buf[:i+1], i)
		if b == i+1 {
			last = i + 1
		}
		if bad != "" {
			return last, bad, scanned(&s)
		}
	}
	return last, "", scanned(&s)
}

// scanned is the commands in s.args, as strings.
func scanned(s *scanner) [][]string {
	var cmds [][]string
	lo := 0
	for _, hi := range s.ends {
		cmd := []string{}
		for _, a := range s.args[lo:hi] {
			cmd = append(cmd, string(a))
		}
		cmds = append(cmds, cmd)
		lo = hi
	}
	return cmds
}

// TestScannerArgs checks the arguments the scanner finds, fed whole (the
// fast path) and a byte at a time.
func TestScannerArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want [][]string
	}{
		{"multibulk", "*3\r\n$7\r\nRL.TAKE\r\n$1\r\nk\r\n$2\r\n10\r\n", [][]string{{"RL.TAKE", "k", "10"}}},
		{"empty and binary bulks", "*3\r\n$4\r\nECHO\r\n$0\r\n\r\n$4\r\n\r\n\x00\n\r\n", [][]string{{"ECHO", "", "\r\n\x00\n"}}},
		{"pipeline and a partial", "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n*1\r\n$4\r\nPI", [][]string{{"PING"}, {"ECHO", "hi"}}},
		{"inline", "RL.TAKE k 1\r\nPING\n", [][]string{{"RL.TAKE", "k", "1"}, {"PING"}}},
		{"inline quotes", "ECHO \"a b\" 'c\\n' \"\"\r\n", [][]string{{"ECHO", "a b", "c\n", ""}}},
		{"blank lines are no command", "\r\n   \r\n\nPING\r\n", [][]string{{"PING"}}},
		{"inline then multibulk", "PING\r\n*1\r\n$4\r\nPING\r\n", [][]string{{"PING"}, {"PING"}}},
		{"commands before a violation", "PING\r\n*1\r\n$x\r\n", [][]string{{"PING"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, got := feedWhole(256, tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("whole: got %q, want %q", got, tt.want)
			}
			_, _, got = feedBytes(256, tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("byte by byte: got %q, want %q", got, tt.want)
			}
		})
	}
}

// readerConn is a net.Conn that reads from r and discards writes (or
// copies them to out).
type readerConn struct {
	net.Conn
	r   io.Reader
	out io.Writer
}

func (c readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c readerConn) Write(p []byte) (int, error) {
	if c.out != nil {
		return c.out.Write(p)
	}
	return len(p), nil
}
func (c readerConn) Close() error                     { return nil }
func (c readerConn) SetWriteDeadline(time.Time) error { return nil }
func (c readerConn) SetReadDeadline(time.Time) error  { return nil }

// guarded wraps r in the guard as Serve's listener would.
func guarded(r io.Reader, out io.Writer, max int) *conn {
	return &conn{Conn: readerConn{r: r, out: out}, srv: &Server{}, sc: scanner{max: max}}
}

// chunkReader returns src in reads of random sizes up to limit (every read
// full when limit is 0), counting what it handed out.
type chunkReader struct {
	src   []byte
	rng   *rand.Rand
	limit int
	off   int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.off >= len(c.src) {
		return 0, io.EOF
	}
	n := min(len(p), len(c.src)-c.off)
	if c.limit > 0 {
		n = min(n, 1+c.rng.IntN(c.limit))
	}
	copy(p, c.src[c.off:c.off+n])
	c.off += n
	return n, nil
}

// readAllGuarded reads every command the guard returns from c, as strings,
// and the largest its read buffer grew.
func readAllGuarded(c *conn) (cmds [][]string, maxBuf int, err error) {
	for {
		got, err := c.readPipeline()
		maxBuf = max(maxBuf, len(c.buf))
		if err != nil {
			return cmds, maxBuf, err
		}
		for _, args := range got {
			cmd := make([]string, len(args))
			for i, a := range args {
				cmd[i] = string(a)
			}
			cmds = append(cmds, cmd)
		}
	}
}

// TestGuardBoundsItsBuffer streams valid pipelined commands, small and
// near the size cap, through the guard at random read sizes, exactly as a
// connection does, and checks that it returns the commands redcon's reader
// finds alone and that its buffer stays below MaxRequestBytes + 4 KiB.
// (redcon alone grows its buffer to the size of the whole stream.)
func TestGuardBoundsItsBuffer(t *testing.T) {
	t.Parallel()
	const capBytes = 64 << 10
	small := "*3\r\n$7\r\nRL.TAKE\r\n$5\r\nkey:1\r\n$1\r\n1\r\n"
	big := "*2\r\n$4\r\nECHO\r\n$65000\r\n" + strings.Repeat("x", 65000) + "\r\n"
	var src []byte
	for i := 0; len(src) < 8<<20; i++ {
		src = append(src, small...)
		if i%2000 == 0 {
			src = append(src, big...)
		}
	}
	for _, chunk := range []int{0, 300, 6000, 70000} {
		rng := func() *rand.Rand { return rand.New(rand.NewPCG(1, uint64(chunk))) }
		want, err := readAll(redcon.NewReader(&chunkReader{src: src, limit: chunk, rng: rng()}))
		if !errors.Is(err, io.EOF) {
			t.Fatalf("redcon alone: %v", err)
		}
		got, buf, err := readAllGuarded(guarded(&chunkReader{src: src, limit: chunk, rng: rng()}, nil, capBytes))
		if !errors.Is(err, io.EOF) {
			t.Fatalf("reads up to %d: guarded: %v", chunk, err)
		}
		if len(got) != len(want) {
			t.Fatalf("reads up to %d: the guard returned %d commands, redcon alone %d", chunk, len(got), len(want))
		}
		for i := range got {
			if !slices.Equal(got[i], stringArgs(want[i])) {
				t.Fatalf("reads up to %d: command %d is %.40q, redcon reads %.40q", chunk, i, got[i], stringArgs(want[i]))
			}
		}
		if bound := capBytes + 4096; buf > bound {
			t.Errorf("reads up to %d: the guard's buffer grew to %d bytes, want <= %d", chunk, buf, bound)
		}
		t.Logf("reads up to %d: %d commands, the guard's buffer at most %d bytes", chunk, len(got), buf)
	}
}

// TestGuardDropsBlankLines streams blank lines, which are no command: the
// guard must drop them as it reads, not keep them in its buffer.
func TestGuardDropsBlankLines(t *testing.T) {
	t.Parallel()
	const capBytes = 1024
	src := []byte(strings.Repeat("\r\n", 1<<20) + strings.Repeat(" ", 40) + "\n" + "PING\r\n")
	for _, chunk := range []int{0, 7, 300} {
		got, buf, err := readAllGuarded(guarded(&chunkReader{src: src, limit: chunk, rng: rand.New(rand.NewPCG(2, uint64(chunk)))}, nil, capBytes))
		if !errors.Is(err, io.EOF) || !reflect.DeepEqual(got, [][]string{{"PING"}}) {
			t.Fatalf("reads up to %d: got %q, %v; want [[PING]], EOF", chunk, got, err)
		}
		if buf > readBufSize {
			t.Errorf("reads up to %d: the guard's buffer grew to %d bytes on blank lines, want <= %d", chunk, buf, readBufSize)
		}
	}
}

// stringArgs is cmd's arguments as strings.
func stringArgs(cmd redcon.Command) []string {
	out := make([]string, len(cmd.Args))
	for i, a := range cmd.Args {
		out[i] = string(a)
	}
	return out
}

// endless is a reader of prefix followed by fill bytes forever; it counts
// what it handed out.
type endless struct {
	prefix string
	fill   byte
	n      int
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	if e.n < len(e.prefix) {
		n = copy(p, e.prefix[e.n:])
	}
	for i := n; i < len(p); i++ {
		p[i] = e.fill
	}
	e.n += len(p)
	return len(p), nil
}

// TestGuardCutsOff checks that requests that never end are cut off after
// at most MaxRequestBytes (plus the read that crossed it), with the error
// written to the client.
func TestGuardCutsOff(t *testing.T) {
	t.Parallel()
	const max = 64 << 10
	tests := []struct {
		name string
		src  *endless
		want string
	}{
		{"claimed 1 GB bulk", &endless{prefix: "*1\r\n$1000000000\r\n", fill: 'a'}, errProtoTooLarge},
		{"endless inline", &endless{fill: 'a'}, errProtoTooLarge},
		{"endless inline of spaces", &endless{prefix: "x", fill: ' '}, errProtoTooLarge},
		{"endless arguments", &endless{prefix: "*10000\r\n" + strings.Repeat("$1\r\na\r\n", 9999), fill: 'a'}, errProtoTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := guarded(tt.src, &out, max).readPipeline()
			var v violation
			if !errors.As(err, &v) || string(v) != tt.want {
				t.Fatalf("readPipeline error = %v, want %q", err, tt.want)
			}
			if got := out.String(); got != "-"+tt.want+"\r\n" {
				t.Errorf("client got %q", got)
			}
			if tt.src.n > max+1 {
				t.Errorf("read %d bytes before cutting off, want <= %d", tt.src.n, max+1)
			}
		})
	}
}

// TestMalformedOverTCP sends bad input over real connections: each gets an
// error and is closed, the replies to the commands before it arrive first,
// and the server keeps serving others.
func TestMalformedOverTCP(t *testing.T) {
	t.Parallel()
	srv, addr := start(t, Config{MaxRequestBytes: 1024, MaxKeyBytes: 64})
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"claimed 1 GB bulk", "*1\r\n$1000000000\r\n", []string{"-" + errProtoTooLarge}},
		{"reply before the violation", "PING\r\n*1\r\n$1000000000\r\naaaa", []string{"+PONG", "-" + errProtoTooLarge}},
		{"pipeline before the violation", "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n*x\r\n", []string{"+PONG", "$hi", "-" + errProtoMultiBulk}},
		{"long inline", strings.Repeat("a", 2000), []string{"-" + errProtoTooLarge}},
		{"bad count", "*x\r\n", []string{"-" + errProtoMultiBulk}},
		// redcon alone spins through the count (2^63 times here) even with
		// no bulk to read: one goroutine at 100% CPU for good.
		{"huge count", "*9000000000000000000\r\n", []string{"-" + errProtoTooLarge}},
		{"no dollar", "*1\r\n+OK\r\n", []string{"-" + errProtoExpected + "+'"}},
		{"bad bulk end", "*1\r\n$4\r\nPINGXX", []string{"-" + errProtoBulk}},
		{"unbalanced quotes (redcon's check)", "ECHO \"abc\r\n", []string{"-ERR Protocol error: unbalanced quotes in request"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := dialRaw(t, addr)
			r.send(tt.in)
			for _, want := range tt.want {
				if got := r.readReply(); got != want {
					t.Errorf("got %s, want %s", got, want)
				}
			}
			r.expectClosed()
			other := dialRaw(t, addr)
			other.send("PING\r\n")
			if got := other.readReply(); got != "+PONG" {
				t.Errorf("another client after the violation: %s", got)
			}
		})
	}
	_ = srv
}

// TestOversizedStreamIsCutOff streams a request far larger than the cap over
// TCP: the server must close the connection long before the client has
// written it all, which it cannot do if it keeps buffering.
func TestOversizedStreamIsCutOff(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	chunk := bytes.Repeat([]byte("a"), 64<<10)
	written := 0
	for written < 1<<30 {
		n, err := nc.Write(chunk)
		written += n
		if err != nil {
			break
		}
	}
	if written >= 64<<20 {
		t.Fatalf("wrote %d MiB of one inline request without the server closing the connection", written>>20)
	}
	t.Logf("the server closed the connection after the client wrote %d KiB", written>>10)
}

// FuzzScanner checks that feeding a read whole, where whole requests take
// the scanner's fast path, finds the same last boundary, the same error
// and the same arguments as feeding it a byte at a time, which never does.
func FuzzScanner(f *testing.F) {
	for _, seed := range []string{
		"*1\r\n$4\r\nPING\r\n",
		strings.Repeat("*3\r\n$7\r\nRL.TAKE\r\n$16\r\nkey:000000123456\r\n$1\r\n1\r\n", 16),
		"*1\r\n$244\r\n" + strings.Repeat("a", 244) + "\r\n",
		"*1\r\n$245\r\n" + strings.Repeat("a", 245) + "\r\n",
		"*01\r\n$004\r\nPING\r\n*42\r\n",
		"*2\r\n$0\r\n\r\n$1\r\nx\r\nPING\r\n*1\r\n$3\r\nab",
		"*1\r\n$1\r\nxy\r\n",
		"*1\r\n$999999999\r\n",
		"*0000000001\r\n$0000000001\r\nx\r\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		const max = 256
		boundary, bad, cmds := feedWhole(max, in)
		last, slowBad, slowCmds := feedBytes(max, in)
		if boundary != last || bad != slowBad {
			t.Fatalf("whole read: %d, %q; byte by byte: %d, %q", boundary, bad, last, slowBad)
		}
		if !reflect.DeepEqual(cmds, slowCmds) {
			t.Fatalf("whole read: %q; byte by byte: %q", cmds, slowCmds)
		}
	})
}
