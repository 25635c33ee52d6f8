//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd || solaris || illumos

package cluster

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

// lateConn is a connection to Redis whose reads, while armed, come late:
// each waits until the node's reply is in the socket (or the read's
// deadline, if none comes), then until the deadline has passed, and only
// then reads. So does a goroutine of sluice's that gets no CPU until after
// its deadline while the node's reply sits in the socket: Go answers the
// read with a timeout and leaves the reply unread. The node itself is
// real and answers at once; only sluice is late.
type lateConn struct {
	net.Conn
	raw   syscall.RawConn
	armed *atomic.Bool

	mu sync.Mutex
	rd time.Time // the read deadline go-redis set last
}

// lateDialer dials plain TCP connections that read late while armed is set.
func lateDialer(armed *atomic.Bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		raw, err := c.(syscall.Conn).SyscallConn()
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		return &lateConn{Conn: c, raw: raw, armed: armed}, nil
	}
}

func (c *lateConn) SyscallConn() (syscall.RawConn, error) { return c.raw, nil }

func (c *lateConn) SetDeadline(t time.Time) error {
	c.setRead(t)
	return c.Conn.SetDeadline(t)
}

func (c *lateConn) SetReadDeadline(t time.Time) error {
	c.setRead(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *lateConn) setRead(t time.Time) {
	c.mu.Lock()
	c.rd = t
	c.mu.Unlock()
}

func (c *lateConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	d := c.rd
	c.mu.Unlock()
	if !c.armed.Load() || d.IsZero() {
		return c.Conn.Read(p)
	}
	// The reply arrives (a paused node sends none: the deadline ends this).
	_ = c.raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return n > 0 || (err != syscall.EAGAIN && err != syscall.EWOULDBLOCK)
	})
	// Sluice gets a CPU back only after the deadline: this wait is the
	// fault the test makes, not a synchronisation.
	for left := time.Until(d); left > 0; left = time.Until(d) {
		time.Sleep(left)
	}
	_ = c.Conn.SetReadDeadline(d) // in the past: the read times out at once
	return c.Conn.Read(p)
}

// A reply that sits unread in the socket past its deadline — the node
// answered, sluice's goroutine got no CPU in time to read it — is an
// answer of the node, not silence: the request is overloaded, not
// unavailable, and the breaker never opens on it, nor on a PING answered
// the same way. Only a node that sent nothing (paused) is silent, however
// late sluice reads.
func TestLateReadIsNotSilence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		paused bool // the node answers nothing while sluice reads late
		// resumeAtPing: the paused node is resumed once the breaker
		// asks it, and answers the PING, which sluice reads late too.
		resumeAtPing bool
	}{
		{name: "replied"},
		{name: "paused", paused: true},
		{name: "answers the breaker's PING", paused: true, resumeAtPing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := redistest.NewSingle(t)
			ctx := t.Context()
			const threshold = 2
			cfg := Config{URL: "redis://" + n.Addr, Timeout: 20 * time.Millisecond, BreakerThreshold: threshold, BreakerCooldown: time.Minute}
			if tc.resumeAtPing {
				// The PING waits MaxTimeout: long enough for the
				// resumed node's answer to come before its deadline.
				cfg.MaxTimeout = 2 * time.Second
			}
			s, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var armed atomic.Bool
			o, err := nodeOptions(s.cfg)
			if err != nil {
				t.Fatal(err)
			}
			o.Dialer = lateDialer(&armed)
			_ = s.single.Close()
			s.single = s.newClient(o) // before the node's queue takes it
			p := &limit.Policy{Name: "p", Limit: 1000, Rate: 1, Period: time.Hour}

			if r := takeN(ctx, s, p, "late")[0]; r.Err != nil { // reads on time: loads the script
				t.Fatal(r.Err)
			}
			paused := false
			if tc.paused {
				if err := n.Pause(); err != nil {
					t.Fatal(err)
				}
				paused = true
				defer func() {
					if paused {
						_ = n.Resume()
					}
				}()
			}
			armed.Store(true)
			b := s.breaker(n.Addr)
			confirming := func() bool {
				b.mu.Lock()
				defer b.mu.Unlock()
				return b.confirming
			}
			var overloaded, unavailable, open int
			var firstUnavailable error
			for range 3 * threshold {
				r := takeN(ctx, s, p, "late")[0]
				switch {
				case errors.Is(r.Err, limit.ErrOverload):
					overloaded++
				case errors.Is(r.Err, ErrCircuitOpen):
					open++
				case errors.Is(r.Err, limit.ErrUnavailable):
					unavailable++
					if firstUnavailable == nil {
						firstUnavailable = r.Err
					}
				default:
					t.Fatalf("take while reads come late: %+v, want overload or unavailable", r)
				}
				// The breaker's question, when it asks one, is answered
				// (or not) before the next take: it reads late too.
				for confirming() {
					if tc.resumeAtPing && paused {
						if err := n.Resume(); err != nil {
							t.Fatal(err)
						}
						paused = false
					}
					time.Sleep(time.Millisecond) // polling interval, not synchronisation
				}
			}
			opens := b.opens.Load()
			t.Logf("%d takes read late: %d overloaded, %d unavailable (first: %v), %d failed fast by the open breaker; breaker opened %d times, %d late reads seen",
				3*threshold, overloaded, unavailable, firstUnavailable, open, opens, lateReads(s))
			if !tc.paused || tc.resumeAtPing {
				if overloaded != 3*threshold || opens != 0 {
					t.Errorf("a node whose replies wait unread: %d of %d takes overloaded, breaker opened %d times; want all overloaded, 0 openings", overloaded, 3*threshold, opens)
				}
				if tc.resumeAtPing && b.alive.Load() != 1 {
					t.Errorf("the breaker heard the node answer its PING %d times, want 1", b.alive.Load())
				}
				return
			}
			if opens == 0 || open == 0 {
				t.Errorf("a paused node read late: breaker opened %d times, %d takes failed fast; want it open", opens, open)
			}
		})
	}
}

// lateReads is the late reads the store's node queues have seen.
func lateReads(s *Store) int64 {
	var n int64
	for _, st := range s.Stats() {
		n += st.LateReads
	}
	return n
}

// opaqueConn hides everything of its connection but net.Conn and
// NetConn, as crypto/tls.Conn does.
type opaqueConn struct{ c net.Conn }

func (o opaqueConn) Read(p []byte) (int, error)         { return o.c.Read(p) }
func (o opaqueConn) Write(p []byte) (int, error)        { return o.c.Write(p) }
func (o opaqueConn) Close() error                       { return o.c.Close() }
func (o opaqueConn) LocalAddr() net.Addr                { return o.c.LocalAddr() }
func (o opaqueConn) RemoteAddr() net.Addr               { return o.c.RemoteAddr() }
func (o opaqueConn) SetDeadline(t time.Time) error      { return o.c.SetDeadline(t) }
func (o opaqueConn) SetReadDeadline(t time.Time) error  { return o.c.SetReadDeadline(t) }
func (o opaqueConn) SetWriteDeadline(t time.Time) error { return o.c.SetWriteDeadline(t) }
func (o opaqueConn) NetConn() net.Conn                  { return o.c }

// replyWaiting sees bytes waiting in a socket, directly or through
// NetConn, whatever the read deadline, without consuming them; not on a
// socket with nothing to read, nor on one its peer closed.
func TestReplyWaiting(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var accepting sync.Mutex // a dial and its accept, one subtest at a time
	pair := func(t *testing.T) (client, far net.Conn) {
		t.Helper()
		accepting.Lock()
		defer accepting.Unlock()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
		return c, s
	}
	// arrived polls until the bytes sent reach c's socket, as a blocking
	// read would, without reading them.
	arrived := func(t *testing.T, c net.Conn) {
		t.Helper()
		raw, err := c.(syscall.Conn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if err := raw.Read(func(fd uintptr) bool {
			var b [1]byte
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			return n > 0 || (err != syscall.EAGAIN && err != syscall.EWOULDBLOCK)
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		send   string // what the peer sends
		closed bool   // the peer closes after sending
		wrap   func(net.Conn) net.Conn
		want   bool
	}{
		{name: "nothing", wrap: func(c net.Conn) net.Conn { return c }},
		{name: "reply", send: "+PONG\r\n", wrap: func(c net.Conn) net.Conn { return c }, want: true},
		{name: "reply through NetConn", send: "+PONG\r\n", wrap: func(c net.Conn) net.Conn { return opaqueConn{c} }, want: true},
		{name: "nothing through NetConn", wrap: func(c net.Conn) net.Conn { return opaqueConn{c} }},
		{name: "peer closed", closed: true, wrap: func(c net.Conn) net.Conn { return c }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, s := pair(t)
			if tc.send != "" {
				if _, err := s.Write([]byte(tc.send)); err != nil {
					t.Fatal(err)
				}
				arrived(t, c)
			}
			if tc.closed {
				_ = s.Close()
				arrived(t, c) // the FIN
			}
			_ = c.SetReadDeadline(time.Now().Add(-time.Second)) // a read now times out at once
			if got := replyWaiting(tc.wrap(c)); got != tc.want {
				t.Errorf("replyWaiting = %v, want %v", got, tc.want)
			}
			if tc.send == "" {
				return
			}
			_ = c.SetReadDeadline(time.Time{})
			b := make([]byte, len(tc.send))
			if _, err := c.Read(b); err != nil || string(b) != tc.send {
				t.Errorf("read after the look: %q, %v; want %q (nothing consumed)", b, err, tc.send)
			}
		})
	}
}
