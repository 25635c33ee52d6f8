package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// serverTLS checks a Config.TLS and returns the copy the server uses, with
// MinVersion at least TLS 1.2.
func serverTLS(cfg *tls.Config) (*tls.Config, error) {
	if len(cfg.Certificates) == 0 && cfg.GetCertificate == nil && cfg.GetConfigForClient == nil {
		return nil, errors.New("server: Config.TLS has no certificate")
	}
	cfg = cfg.Clone()
	if cfg.MinVersion < tls.VersionTLS12 {
		cfg.MinVersion = tls.VersionTLS12
	}
	return cfg, nil
}

// tlsListener makes every accepted connection a TLS server connection. It
// sits under the guard, so the guard's size caps apply to the decrypted
// requests and its deadlines to the socket below.
type tlsListener struct {
	net.Listener
	cfg     *tls.Config
	timeout time.Duration // of the handshake
}

func newTLSListener(ln net.Listener, cfg *tls.Config, handshakeTimeout time.Duration) net.Listener {
	return &tlsListener{Listener: ln, cfg: cfg, timeout: handshakeTimeout}
}

// Accept returns at once: the handshake happens on the connection's first
// Read or Write, in the connection's own goroutine, so a slow or silent
// client never holds up the accept loop.
func (l *tlsListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tlsConn{Conn: tls.Server(nc, l.cfg), timeout: l.timeout}, nil
}

// tlsConn is a TLS server connection whose handshake must finish within
// timeout of the first Read or Write. Without that bound, with IdleTimeout
// 0, a client could hold a MaxClients slot forever with half a ClientHello,
// since the guard's RequestTimeout only starts at the first request byte.
type tlsConn struct {
	*tls.Conn
	timeout time.Duration
	shaken  atomic.Bool
	wdl     time.Time // the last write deadline set; bounds a handshake started by Write
}

func (c *tlsConn) handshake(deadline time.Time) error {
	if c.shaken.Load() {
		return nil
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	// HandshakeContext closes the socket when ctx ends first.
	err := c.HandshakeContext(ctx)
	if err == nil {
		c.shaken.Store(true)
	}
	return err
}

func (c *tlsConn) Read(p []byte) (int, error) {
	if err := c.handshake(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

// Write bounds a handshake it starts by the write deadline too: the guard
// answers a client over MaxClients from the accept loop with a 1s deadline.
func (c *tlsConn) Write(p []byte) (int, error) {
	dl := time.Now().Add(c.timeout)
	if !c.wdl.IsZero() && c.wdl.Before(dl) {
		dl = c.wdl
	}
	if err := c.handshake(dl); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

func (c *tlsConn) SetWriteDeadline(t time.Time) error {
	c.wdl = t
	return c.Conn.SetWriteDeadline(t)
}

func (c *tlsConn) SetDeadline(t time.Time) error {
	c.wdl = t
	return c.Conn.SetDeadline(t)
}

// closeNotifyTimeout bounds the close_notify alert that tls.Conn.Close
// sends (it would wait up to 5s for a client that reads nothing), so that
// Shutdown closing many connections is not held up by one.
const closeNotifyTimeout = 100 * time.Millisecond

func (c *tlsConn) Close() error {
	t := time.AfterFunc(closeNotifyTimeout, func() { _ = c.NetConn().Close() })
	defer t.Stop()
	return c.Conn.Close()
}
