package rls

import (
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// With RequirePass or Users, every connection must authenticate in time:
// Serve wraps each accepted connection in a conn whose timer closes it
// AuthTimeout after the accept, unless a call on it has authenticated by
// then or the users in force need no credentials (a nopass default user). A connection that sends nothing, or only calls that fail
// authentication, so gives its MaxConnections slot back; one that has
// authenticated once is left alone (IdleTimeout still applies).
//
// A call learns its connection from its peer's AuthInfo: the transport
// credentials (TLS, or insecure for plaintext) are wrapped in connCreds,
// whose handshake returns the wrapped AuthInfo of the raw connection grpc
// accepted, so the interceptor marks the very connection that carried the
// token, at the cost of a context lookup per call.

// listener arms the timer of every connection it accepts.
type listener struct {
	net.Listener
	authTimeout time.Duration
	expired     *atomic.Int64 // connections closed unauthenticated
	required    func() bool   // whether calls need credentials now
}

func (l *listener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &conn{Conn: nc, expired: l.expired, required: l.required}
	c.timer = time.AfterFunc(l.authTimeout, c.expire)
	return c, nil
}

// conn is an accepted connection that has until its timer fires to
// authenticate. Its methods are safe for concurrent use.
type conn struct {
	net.Conn
	timer    *time.Timer // set before Accept returns, never changed
	authed   atomic.Bool
	expired  *atomic.Int64
	required func() bool
}

// expire closes c unless a call on it has authenticated, or calls need
// no credentials.
func (c *conn) expire() {
	if !c.authed.Load() && c.required() {
		c.expired.Add(1)
		_ = c.Conn.Close()
	}
}

// authenticated records that a call on c carried the token.
func (c *conn) authenticated() {
	if !c.authed.Load() && !c.authed.Swap(true) {
		c.timer.Stop()
	}
}

func (c *conn) Close() error {
	c.timer.Stop()
	return c.Conn.Close()
}

// connCreds are the door's transport credentials, whose AuthInfo names
// the connection (connInfo).
type connCreds struct {
	credentials.TransportCredentials
}

func (cc connCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	nc, info, err := cc.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	c, _ := raw.(*conn)
	return nc, connInfo{AuthInfo: info, c: c}, nil
}

func (cc connCreds) Clone() credentials.TransportCredentials {
	return connCreds{cc.TransportCredentials.Clone()}
}

// connInfo is the AuthInfo of TLS or insecure, and the connection. (It
// hides credentials.TLSInfo from a type assertion; nothing here makes one.)
type connInfo struct {
	credentials.AuthInfo
	c *conn // nil if grpc handed the handshake another net.Conn
}

// markAuthenticated tells the connection of a call from p that it has
// authenticated.
func markAuthenticated(p *peer.Peer) {
	if p == nil {
		return
	}
	if ci, ok := p.AuthInfo.(connInfo); ok && ci.c != nil {
		ci.c.authenticated()
	}
}
