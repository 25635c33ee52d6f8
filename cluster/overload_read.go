package cluster

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Late reads: a deadline that passed while the node's reply sat unread in
// the socket is sluice's own lateness, not the node's silence. Under CPU
// starvation — the machine's cores busy, sluice's goroutines waiting for
// one, the process descheduled — the runtime may fire a read's deadline
// timer before it polls the socket that became readable in time, and a
// goroutine that runs again after its deadline is answered "timeout"
// without a look at the socket. Counting that as silence opened the
// breaker of a node that had answered every pipeline (TestLateReadIsNotSilence).
//
// So every connection to a node is dialed through watchReads: a read that
// ends in a timeout looks, without waiting and without consuming anything
// (MSG_PEEK), whether bytes from the node are waiting. If they are, the
// node answered after the command was sent, and its queue hears so
// (noteAlive): the breaker does not count the pipeline as a failure, and
// its requests are overloaded — late — not unavailable. The reply itself is
// still given up (go-redis has failed the read; the connection is closed),
// so the requests in it go to on_overload and are never replayed, as any
// late reply. The look costs nothing on time: it runs only after a
// timeout.

// watchReads returns o's dialer, the one given or go-redis's own, with its
// connections' late reads reported to the queue of the node at o.Addr.
func (s *Store) watchReads(o *redis.Options) func(ctx context.Context, network, addr string) (net.Conn, error) {
	dial, node := o.Dialer, o.Addr
	if dial == nil {
		dial = redis.NewDialer(o)
	}
	late := func() { s.lateRead(node) }
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		rc := readConn{Conn: c, late: late}
		if _, ok := c.(syscall.Conn); ok {
			// go-redis checks a pooled connection's health through
			// syscall.Conn on the connection itself: keep it visible.
			return &sysReadConn{rc}, nil
		}
		return &rc, nil // TLS: go-redis finds the socket through NetConn
	}
}

// lateRead records that a read from the node at addr timed out with the
// node's reply waiting in the socket.
func (s *Store) lateRead(addr string) {
	v, ok := s.queues.Load(addr)
	if !ok {
		return
	}
	q := v.(*nodeQueue)
	q.lateReads.Add(1)
	q.noteAlive(time.Now())
}

// readConn is a connection to a node whose reads that time out look
// whether the node's reply was waiting (see watchReads).
type readConn struct {
	net.Conn
	late func()
}

func (c *readConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && isReadTimeout(err) && replyWaiting(c.Conn) {
		c.late()
	}
	return n, err
}

// NetConn is the connection c wraps, as crypto/tls.Conn's NetConn.
func (c *readConn) NetConn() net.Conn { return c.Conn }

// sysReadConn is a readConn on a connection that is a syscall.Conn.
type sysReadConn struct{ readConn }

func (c *sysReadConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}

// isReadTimeout reports whether err is a read's deadline passing.
func isReadTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// replyWaiting reports whether bytes from the peer wait unread in the
// socket under c (reached through NetConn, as under TLS). It never waits,
// whatever c's deadline, and consumes nothing.
func replyWaiting(c net.Conn) bool {
	for range 8 {
		if sc, ok := c.(syscall.Conn); ok {
			raw, err := sc.SyscallConn()
			return err == nil && peekable(raw)
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return false
		}
		if c = u.NetConn(); c == nil {
			return false
		}
	}
	return false
}
