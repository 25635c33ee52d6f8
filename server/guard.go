package server

import (
	"bytes"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
)

// The guard is the RESP door's reader: every connection's bytes go through
// its scanner once, which follows RESP and inline framing, fails the
// connection once one request would exceed MaxRequestBytes, and records
// each whole request's arguments as it goes; the dispatcher runs them as
// they are, views into the connection's read buffer (valid until its next
// read), so a request is parsed once and copied never. (Before, redcon's
// reader parsed every request a second time behind the guard, copied it
// and allocated its argument slice: two allocations a command.)
//
// The read buffer holds the request in progress from its first byte: after
// a pipeline has run, what follows its last whole request moves to the
// front, and the buffer grows only while one partial request fills it, to
// MaxRequestBytes + 1 at most; one larger than readBufKeep is dropped once
// the connection has nothing partial. A client streaming pipelined
// commands at unaligned offsets therefore never grows it, and no request,
// however it is cut into reads, makes it hold more than about
// MaxRequestBytes + 4 KiB.
//
// Read deadlines are the guard's: between requests a read may wait
// IdleTimeout, and a request must be complete within RequestTimeout of its
// first byte. Every write must be taken by the client within WriteTimeout.

// listener wraps the net.Listener given to Serve: it enforces MaxClients,
// wraps every connection in the guard, and on Shutdown keeps next from
// returning (which would make Serve close every connection at once) until
// in-flight pipelines have finished.
type listener struct {
	net.Listener
	srv     *Server
	release chan struct{}
	once    sync.Once
	// rejecters holds a token per connection being turned away.
	rejecters chan struct{}
}

func newListener(ln net.Listener, s *Server) *listener {
	return &listener{Listener: ln, srv: s, release: make(chan struct{}), rejecters: make(chan struct{}, maxRejecters)}
}

// releaseAccept lets a waiting next return net.ErrClosed.
func (l *listener) releaseAccept() { l.once.Do(func() { close(l.release) }) }

// next returns the next connection within MaxClients; those over it are
// answered -ERR max number of clients reached and closed here.
func (l *listener) next() (*conn, error) {
	s := l.srv
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			if s.closing.Load() {
				<-l.release
				return nil, net.ErrClosed
			}
			if !errors.Is(err, net.ErrClosed) {
				// Out of file descriptors and the like: Serve retries at
				// once, so slow its loop down.
				time.Sleep(acceptBackoff)
			}
			return nil, err
		}
		if s.connected.Add(1) > int64(s.cfg.MaxClients) {
			s.connected.Add(-1)
			s.rejected.Add(1)
			l.reject(nc)
			continue
		}
		s.totalConns.Add(1)
		return &conn{Conn: nc, srv: s, sc: scanner{max: s.cfg.MaxRequestBytes}}, nil
	}
}

// maxRejecters bounds the connections being told "max number of clients"
// at once; past it, more are closed without the message.
const maxRejecters = 64

// reject answers a connection over MaxClients and closes it, off the accept
// loop: over TLS the write is a handshake first, and a client that stalls
// it must not hold up the connections behind it. At most maxRejecters are
// in progress, each for at most a second, so a flood costs bounded memory.
func (l *listener) reject(nc net.Conn) {
	select {
	case l.rejecters <- struct{}{}:
	default:
		_ = nc.Close()
		return
	}
	go func() {
		defer func() { <-l.rejecters }()
		_ = nc.SetDeadline(time.Now().Add(time.Second))
		_, _ = nc.Write([]byte(errMaxClientsLine))
		_ = nc.Close()
	}()
}

// acceptBackoff is the pause after a failed Accept.
const acceptBackoff = 50 * time.Millisecond

// violation is the error readPipeline returns when the client broke the
// protocol or a limit; the server then closes the connection.
type violation string

func (v violation) Error() string { return string(v) }

// conn is one guarded client connection. readPipeline and Write are called
// only by the connection's goroutine; Close may be called from any goroutine.
type conn struct {
	net.Conn
	srv *Server
	sc  scanner

	buf  []byte     // buf[:end] read from the client; it ends with the partial request
	end  int        //
	last int        // where the last command readPipeline returned ends in buf
	cmds [][][]byte // the commands of the last readPipeline, views into buf and sc.args
	rerr error      // network error to return once the commands before it have run
	fail string     // protocol error to report on the next readPipeline
	sent bool       // fail was written to the client

	reqStart time.Time // when the first byte of the partial request arrived
	deadline time.Time // the read deadline set on Conn
	wdl      time.Time // the write deadline set on Conn

	closed atomic.Bool
}

// Read buffer sizes: a connection's buffer starts at readBufSize and one
// that grew beyond readBufKeep is dropped once nothing partial is in it.
const (
	readBufSize = 4 << 10
	readBufKeep = 64 << 10
)

// readPipeline returns the whole requests of the next read that holds at
// least one, each as its arguments. They stay valid until the next call,
// which reuses the buffer they point into. A request broken or over a
// limit is answered with its error line and ends the connection, after the
// whole requests before it have been returned; so does a network error.
func (c *conn) readPipeline() ([][][]byte, error) {
	c.forget()
	for {
		if c.fail != "" {
			return nil, c.reject()
		}
		if c.rerr != nil {
			return nil, c.rerr
		}
		if c.end == len(c.buf) {
			c.grow()
		}
		p := c.buf[c.end:]
		// Never read past the cap of the request in progress: a request that
		// will not fit is cut off within MaxRequestBytes + 1 of its bytes.
		if room := c.sc.room(); room < len(p) {
			p = p[:room]
		}
		inRequest := c.sc.state != stIdle
		c.setReadDeadline(inRequest)
		n, err := c.Conn.Read(p)
		if n == 0 {
			if err == nil {
				continue
			}
			if inRequest && errors.Is(err, os.ErrDeadlineExceeded) {
				err = errRequestTimeout
			}
			return nil, err
		}
		from := c.end
		c.end += n
		boundary, bad := c.sc.feed(c.buf[:c.end], from)
		if c.sc.state != stIdle && (!inRequest || boundary > 0) {
			c.reqStart = time.Now()
		}
		c.fail, c.rerr = bad, err
		if len(c.sc.ends) == 0 {
			// Blank lines, or more of a partial request: keep only that.
			c.keepPartial()
			continue
		}
		c.last = boundary
		c.cmds = c.cmds[:0]
		lo := 0
		for _, hi := range c.sc.ends {
			c.cmds = append(c.cmds, c.sc.args[lo:hi:hi])
			lo = hi
		}
		return c.cmds, nil
	}
}

// partial is how many bytes at the end of the buffer the request in
// progress has.
func (c *conn) partial() int {
	if c.sc.state == stIdle {
		return 0
	}
	return c.sc.n
}

// keepPartial moves the request in progress to the front of the buffer and
// drops what was before it.
func (c *conn) keepPartial() {
	if n := c.partial(); n < c.end {
		c.end = copy(c.buf, c.buf[c.end-n:c.end])
	}
}

// forget drops the commands of the last readPipeline: the partial request
// after them moves to the front of the buffer.
func (c *conn) forget() {
	clear(c.cmds)
	c.cmds = c.cmds[:0]
	clear(c.sc.args)
	c.sc.args, c.sc.ends = c.sc.args[:0], c.sc.ends[:0]
	if cap(c.cmds) > maxScratch || cap(c.sc.args) > maxScratch {
		c.cmds, c.sc.args, c.sc.ends = nil, nil, nil
	}
	c.keepPartial()
	if c.end == 0 && len(c.buf) > readBufKeep {
		c.buf = nil
	}
	if c.sc.state == stIdle && cap(c.sc.marks) > maxScratch {
		c.sc.marks = nil
	}
}

// grow makes room in a full buffer, which then holds one partial request
// from its first byte (at most MaxRequestBytes of it): twice the size, up
// to the request's cap and the byte that would break it.
func (c *conn) grow() {
	if c.buf == nil {
		c.buf = make([]byte, readBufSize)
		return
	}
	buf := make([]byte, max(len(c.buf)+1, min(2*len(c.buf), c.sc.max+1)))
	copy(buf, c.buf[:c.end])
	c.buf = buf
}

// errRequestTimeout ends a connection whose request took longer than
// RequestTimeout to arrive.
var errRequestTimeout = errors.New("request not complete within RequestTimeout")

// setReadDeadline sets the deadline of the next network read: RequestTimeout
// after the partial request's first byte, or IdleTimeout from now between
// requests (none if IdleTimeout is 0).
func (c *conn) setReadDeadline(partial bool) {
	var dl time.Time
	switch {
	case partial:
		dl = c.reqStart.Add(c.srv.cfg.RequestTimeout)
	case c.srv.cfg.IdleTimeout > 0:
		dl = time.Now().Add(c.srv.cfg.IdleTimeout)
	}
	if !dl.Equal(c.deadline) {
		c.deadline = dl
		_ = c.Conn.SetReadDeadline(dl)
	}
}

// Write writes replies within WriteTimeout (and at most an eighth more).
// It skips empty writes: redcon flushes its own (empty) writer after every
// pipeline.
//
// Setting a deadline re-arms a runtime timer, which cost sluice about 5 % of
// its CPU at pipeline 1 when it was done for every write; so the deadline is
// moved only when fewer than WriteTimeout are left on it, and then to
// WriteTimeout plus an eighth, which a busy connection does once per eighth
// of WriteTimeout rather than once per reply.
func (c *conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	wt := c.srv.cfg.WriteTimeout
	if now := time.Now(); c.wdl.Sub(now) < wt {
		c.wdl = now.Add(wt + wt/writeSlack)
		_ = c.Conn.SetWriteDeadline(c.wdl)
	}
	return c.Conn.Write(p)
}

// writeSlack: a write may take up to WriteTimeout + WriteTimeout/writeSlack
// before its connection is closed.
const writeSlack = 8

// reject writes the protocol error once and returns it as the read error.
func (c *conn) reject() error {
	if !c.sent {
		c.sent = true
		c.srv.errReplies.Add(1)
		c.wdl = time.Now().Add(time.Second)
		_ = c.Conn.SetWriteDeadline(c.wdl)
		_, _ = c.Conn.Write([]byte("-" + c.fail + "\r\n"))
	}
	return violation(c.fail)
}

// Close closes the connection once and releases its MaxClients slot.
func (c *conn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.srv.connected.Add(-1)
	return c.Conn.Close()
}

// scanner follows the framing of the requests on one connection, byte by
// byte across reads, the way redcon's reader splits them: a request starting
// with '*' is a RESP multibulk ("*<n>\r\n" then n times "$<len>\r\n<data>\r\n"),
// anything else is an inline command ending at '\n'. It is stricter than
// redcon (digits only, no sign), never more lenient, and splits inline
// commands with redcon's own parser, so the two never disagree on where a
// request ends or what its arguments are (FuzzRESP checks both).
type scanner struct {
	max    int // MaxRequestBytes
	state  uint8
	n      int // bytes of the current request so far
	num    int // the count or bulk length being parsed
	digits int
	bulks  int // bulks still expected
	data   int // payload bytes of the current bulk still expected
	seps   int // separators of the current inline command

	// marks are the offset (from the request's first byte) and length of
	// each bulk of the request in progress.
	marks []int
	// argsOut holds the arguments of the whole requests fed since it was
	// emptied: request i's are args[ends[i-1]:ends[i]].
	argsOut
}

// argsOut is where a scanner puts the requests it completes.
type argsOut struct {
	args [][]byte
	ends []int
}

// room is how many more bytes the request in progress may have, plus the
// one that would break the cap.
func (s *scanner) room() int {
	if s.state == stIdle {
		return s.max + 1
	}
	return s.max - s.n + 1
}

// Scanner states.
const (
	stIdle      = iota // between requests
	stInline           // inside an inline command
	stCount            // "*" digits
	stCountLF          // "*<n>\r"
	stDollar           // expecting '$'
	stBulkLen          // "$" digits
	stBulkLenLF        // "$<len>\r"
	stData             // payload
	stDataCR           // payload done, expecting '\r'
	stDataLF           // expecting '\n'
)

// inlineCost bounds, as a multiple of MaxRequestBytes, the product of an
// inline command's separators and its length. redcon allocates a fresh
// buffer of the rest of the line at every space or quote, so a 64 KiB line
// of "a a a ..." would cost it a gigabyte.
const inlineCost = 4

// feed scans buf[from:], the next bytes from the client, after buf[:from],
// which holds (at least) the request in progress from its first byte. The
// arguments of every request that ends in it are appended to s.args, as
// views into buf (for inline commands, copies). It returns the offset in
// buf just past the last request that ends in buf[from:] (0 if none does)
// and, if those bytes break the protocol or a limit, the error text;
// scanning stops there, and the requests before stay in s.args.
func (s *scanner) feed(buf []byte, from int) (boundary int, bad string) {
	b := buf
	for i := from; i < len(b); i++ {
		if s.state == stIdle {
			if n := s.whole(b[i:]); n > 0 {
				i += n - 1
				boundary = i + 1
				continue
			}
		}
		if s.state == stData {
			k := min(s.data, len(b)-i)
			s.n += k
			s.data -= k
			i += k - 1
			if s.data == 0 {
				s.state = stDataCR
			}
			continue
		}
		if s.state == stIdle {
			s.n = 0
		}
		s.n++
		if s.n > s.max {
			return boundary, errProtoTooLarge
		}
		end, bad := s.step(b[i])
		if bad != "" {
			return boundary, bad
		}
		if end {
			if bad := s.complete(b[i+1-s.n : i+1]); bad != "" {
				return boundary, bad
			}
			boundary = i + 1
		}
	}
	return boundary, ""
}

// complete appends the arguments of req, a whole request the byte-by-byte
// scan ended, to s.args: its bulks' marks, or what redcon makes of an
// inline command. A line of spaces (or empty) is no command, as for redcon.
func (s *scanner) complete(req []byte) (bad string) {
	if req[0] == '*' {
		for k := 0; k < len(s.marks); k += 2 {
			at, size := s.marks[k], s.marks[k+1]
			s.args = append(s.args, req[at:at+size:at+size])
		}
		s.ends = append(s.ends, len(s.args))
		return ""
	}
	line := req[:len(req)-1]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	if len(bytes.Trim(line, " ")) == 0 {
		return ""
	}
	cmd, err := redcon.Parse(req)
	if err != nil {
		// Unbalanced quotes, the one error of redcon's inline parser.
		return "ERR " + err.Error()
	}
	s.args = append(s.args, cmd.Args...)
	s.ends = append(s.ends, len(s.args))
	return ""
}

// step scans one byte of a request outside a bulk's payload (which feed
// skips whole), already counted in s.n. It reports whether the byte ends
// the request, or the error text if it breaks the protocol or a limit.
func (s *scanner) step(ch byte) (end bool, bad string) {
	switch s.state {
	case stIdle:
		if ch == '*' {
			s.state, s.num, s.digits = stCount, 0, 0
			s.marks = s.marks[:0]
			return false, ""
		}
		s.state, s.seps = stInline, 0
		fallthrough
	case stInline:
		switch ch {
		case '\n':
			s.state = stIdle
			return true, ""
		case ' ', '"', '\'':
			s.seps++
		}
		if s.seps*s.n > inlineCost*s.max {
			return false, errProtoTooLarge
		}
	case stCount:
		// Every bulk takes at least 6 bytes ("$0\r\n\r\n").
		if bad := s.length(ch, s.num > 0, s.max/6, stCountLF, errProtoMultiBulk); bad != "" {
			return false, bad
		}
	case stCountLF:
		if ch != '\n' {
			return false, errProtoMultiBulk
		}
		s.state, s.bulks = stDollar, s.num
	case stDollar:
		if ch != '$' {
			return false, errProtoExpected + string(printable(ch)) + "'"
		}
		s.state, s.num, s.digits = stBulkLen, 0, 0
	case stBulkLen:
		// The header's CRLF, the payload and its CRLF follow: n+2+len+2
		// bytes at most max.
		if bad := s.length(ch, s.digits > 0, s.max-s.n-4, stBulkLenLF, errProtoBulk); bad != "" {
			return false, bad
		}
	case stBulkLenLF:
		if ch != '\n' {
			return false, errProtoBulk
		}
		s.data = s.num
		s.marks = append(s.marks, s.n, s.num)
		s.state = stDataCR
		if s.data > 0 {
			s.state = stData
		}
	case stDataCR:
		if ch != '\r' {
			return false, errProtoBulk
		}
		s.state = stDataLF
	case stDataLF:
		if ch != '\n' {
			return false, errProtoBulk
		}
		s.bulks--
		s.state = stDollar
		if s.bulks == 0 {
			s.state = stIdle
			return true, ""
		}
	}
	return false, ""
}

// whole returns the length of the multibulk request at the start of b if
// all of it is in b and the byte-by-byte scan below would accept it with no
// error, and appends its arguments to s.args; else it returns 0, appends
// nothing, and the byte-by-byte scan decides. It is the common case (whole
// requests from a client's write) at a fraction of the cost: a few
// comparisons per header instead of a state change per byte, which made
// feed the largest single cost of sluice at pipeline 16 (11 % of its
// instructions under callgrind). It applies feed's bounds: a count of at
// most max/6 and a request of at most max bytes (which is also feed's
// bound on each bulk length: its bulk must end within max); it gives up
// on counts and lengths of more than 9 digits, which feed handles.
func (s *scanner) whole(b []byte) int {
	if len(b) < 4 || b[0] != '*' {
		return 0
	}
	count, i := wholeNumber(b, 1)
	if i < 0 || count < 1 || count > s.max/6 {
		return 0
	}
	first := len(s.args)
	for range count {
		if i >= len(b) || b[i] != '$' {
			s.args = s.args[:first]
			return 0
		}
		size, end := wholeNumber(b, i+1)
		if end < 0 || size > s.max {
			s.args = s.args[:first]
			return 0
		}
		i = end + size + 2 // past the data and its CRLF
		if i > len(b) || b[i-2] != '\r' || b[i-1] != '\n' {
			s.args = s.args[:first]
			return 0
		}
		s.args = append(s.args, b[end:end+size:end+size])
	}
	if i > s.max {
		s.args = s.args[:first]
		return 0
	}
	s.ends = append(s.ends, len(s.args))
	return i
}

// wholeNumber reads the digits of a count or length at b[i:] and the CRLF
// after them. It returns the number and the index past the LF, or -1 for
// no digits, more than 9, anything but a digit before CRLF, or the end of b.
func wholeNumber(b []byte, i int) (n, next int) {
	start := i
	for ; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		n = n*10 + int(b[i]-'0')
	}
	if d := i - start; d == 0 || d > 9 || i+1 >= len(b) || b[i] != '\r' || b[i+1] != '\n' {
		return 0, -1
	}
	return n, i + 2
}

// length scans one byte of the decimal count after '*' or length after
// '$': a digit adds to s.num, which may be at most most; CR, when ok says
// the digits so far make a length, moves on to next; anything else is the
// error bad.
func (s *scanner) length(ch byte, ok bool, most int, next uint8, bad string) string {
	switch {
	case '0' <= ch && ch <= '9':
		s.num = s.num*10 + int(ch-'0')
		s.digits++
		if s.num > most {
			return errProtoTooLarge
		}
	case ch == '\r' && ok:
		s.state = next
	default:
		return bad
	}
	return ""
}

// printable keeps an error line printable when it quotes a client's byte.
func printable(ch byte) byte {
	if ch < ' ' || ch > '~' {
		return '?'
	}
	return ch
}
