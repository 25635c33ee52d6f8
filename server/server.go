package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"

	"github.com/sluice-rl/sluice/internal/acl"
	"github.com/sluice-rl/sluice/internal/edge"
	"github.com/sluice-rl/sluice/limit"
)

// Decider decides batches of rate-limit requests; the limiter implements it.
// Implementations must be safe for concurrent use.
type Decider interface {
	// Decide fills out[i] for reqs[i]; len(out) == len(reqs). The requests
	// of one call come from one client's pipeline, in its order, and must
	// be decided as if one after the other. A failure of one item is its
	// out[i].Err: errors.Is(err, limit.ErrNoPolicy) for a key that no
	// policy matches.
	Decide(ctx context.Context, reqs []limit.Request, out []limit.Result)
	// Reset forgets the state of key; it reports whether there was any.
	Reset(ctx context.Context, key string) (bool, error)
}

// MultiDecider is a Decider that also answers RL.MTAKE and CL.THROTTLE; the
// limiter implements it. Without it those commands answer an error.
type MultiDecider interface {
	Decider
	// MTake decides reqs all-or-nothing: it reports whether every one was
	// admitted, and fills out with each rule's own verdict. An error fails
	// the whole call and spends nothing.
	MTake(ctx context.Context, reqs []limit.Request, out []limit.Result) (bool, error)
	// ThrottlePolicy returns the policy of CL.THROTTLE key max_burst count
	// period (seconds), or why the arguments cannot make one.
	ThrottlePolicy(key string, maxBurst, count, period int64) (*limit.Policy, error)
}

// Config configures a Server. The zero value of each field means its
// default; Decider is required.
type Config struct {
	// Addr is the TCP address ListenAndServe listens on.
	// Default "127.0.0.1:6380".
	Addr string
	// Decider decides RL.TAKE, RL.PEEK and RL.RESET. Required.
	Decider Decider
	// Policies answers RL.POLICY; nil answers it with an error.
	Policies PolicyAdmin
	// MaxClients is how many connections are served at once; one more is
	// answered "-ERR max number of clients reached" and closed.
	// Default 10000.
	MaxClients int
	// MaxRequestBytes is the largest request (one command, RESP or inline)
	// the server reads; a larger one gets "-ERR Protocol error: request too
	// large" and its connection is closed before more is buffered.
	// Default 65536 (64 KiB).
	MaxRequestBytes int
	// MaxKeyBytes is the longest key RL.* commands accept, in bytes.
	// Default 1024.
	MaxKeyBytes int
	// RequirePass, when not empty, is the password of the "default" user:
	// clients must AUTH (or HELLO ... AUTH) before anything but AUTH, HELLO,
	// QUIT and RESET. Default: no password.
	RequirePass string
	// AdminPass, when not empty, is the password of the "admin" user: the
	// commands that change limits for every client (RL.RESET, RL.POLICY SET
	// and DEL) then answer NOPERM unless the connection ran AUTH admin
	// <AdminPass> (or HELLO 2 AUTH admin <AdminPass>). Authenticating as
	// admin also satisfies RequirePass. Default: no admin user, and those
	// commands are open to every authenticated client.
	AdminPass string
	// Users, when not nil, are the users and their permissions (an ACL
	// file; see internal/acl), checked before every command; with it,
	// RequirePass and AdminPass must be empty. A reload stores a new List in it;
	// call UsersChanged afterwards so that the connections of deleted users
	// are closed at once. Default: acl.FromFlags(RequirePass, AdminPass).
	Users *acl.Holder
	// LoadUsers, when not nil, is ACL LOAD: it reloads the users into
	// Users, or says why not and leaves them as they were. nil: ACL LOAD
	// answers that there is no ACL file.
	LoadUsers func() error
	// TLS, when not nil, makes Serve and ListenAndServe speak TLS only:
	// every connection must complete a TLS handshake (within RequestTimeout)
	// before its first command. It needs a certificate (Certificates,
	// GetCertificate or GetConfigForClient); for client certificates set
	// ClientAuth and ClientCAs. A MinVersion below TLS 1.2 is raised to it.
	// Default nil: plain TCP.
	TLS *tls.Config
	// IdleTimeout closes a connection that starts no request for this long
	// after its last reply (or after connecting). Default 0: never.
	IdleTimeout time.Duration
	// RequestTimeout closes a connection whose request, once its first byte
	// has arrived, is not complete within this long: a client trickling a
	// byte at a time would otherwise hold its MaxClients slot and up to
	// MaxRequestBytes of buffer forever. No reply is sent. It applies even
	// when IdleTimeout is 0. Default 10s.
	RequestTimeout time.Duration
	// WriteTimeout closes a connection when one write of replies (at most
	// about MaxOutputBytes) is not taken by the client within this long, so a
	// client that pipelines requests and never reads its replies is dropped
	// instead of blocking its goroutine and MaxClients slot forever. A write
	// gets at least WriteTimeout and at most an eighth more: the deadline is
	// moved forward only when less than WriteTimeout is left on it, not
	// before every write. Default 10s.
	WriteTimeout time.Duration
	// MaxOutputBytes is how many bytes of replies a connection buffers before
	// writing them out, even in the middle of a pipeline; with WriteTimeout it
	// bounds the memory a non-reading client can pin to about MaxOutputBytes
	// plus one reply (and the kernel's socket buffers). Default 1 MiB.
	MaxOutputBytes int
	// Logger receives per-connection events and recovered panics, never
	// per-request lines. Default: discard.
	Logger *slog.Logger
	// Version is sluice's version, shown by INFO as sluice_version.
	// Default "dev".
	Version string
	// Info, when not nil, writes extra INFO sections ("# Name\r\nkey:value\r\n")
	// after the server's own. It is called concurrently, once per INFO.
	Info func(w io.Writer)
	// HotKeys, when not nil, lists the keys this instance treats as hot, for
	// RL.HOTKEYS. nil answers an empty array.
	HotKeys func() []HotKey
	// Regions, when not nil, lists this instance's region and the others
	// it knows of, for RL.REGIONS; nil answers an error: no region.
	Regions func() []Region
	// OnPipeline, when set, is told of every pipeline of commands
	// commands read together, and the time d from the read to its replies
	// written: sluice's own time per request, for metrics. It is called
	// on the connection's goroutine and must be fast.
	OnPipeline func(d time.Duration, commands int)
	// ShutdownTimeout bounds how long Shutdown waits for in-flight commands,
	// in addition to its context. Default 10s.
	ShutdownTimeout time.Duration
}

// Region is one line of RL.REGIONS. LastHomeContact is unix ms, -1 never.
type Region struct {
	Name              string
	Self              bool
	Keys              int
	Held              int64
	Claimed, Returned int64
	Demand            float64 // tokens/s
	LastHomeContact   int64
}

// HotKey is one line of RL.HOTKEYS.
type HotKey struct {
	Key, Policy, Mode string
	Rate              float64   // requests/s on this instance
	Since             time.Time // when the key became hot
}

// Defaults of Config.
const (
	DefaultAddr            = "127.0.0.1:6380"
	DefaultMaxClients      = edge.DefaultMaxConnections
	DefaultMaxRequestBytes = 64 << 10
	DefaultMaxKeyBytes     = edge.DefaultMaxKeyBytes
	DefaultShutdownTimeout = 10 * time.Second
	DefaultRequestTimeout  = 10 * time.Second
	DefaultWriteTimeout    = 10 * time.Second
	DefaultMaxOutputBytes  = 1 << 20
)

// The bounds of MaxRequestBytes: a request must have room for a key and a
// few arguments, and 512 MiB is Redis's own largest bulk.
const (
	minRequestBytes = 256
	maxRequestBytes = 512 << 20
)

// ErrServerClosed is returned by Serve and ListenAndServe after Shutdown.
var ErrServerClosed = errors.New("server: closed")

// Stats are the server's counters since New.
type Stats struct {
	ConnectedClients  int64 // connections open now
	TotalConnections  int64 // connections accepted, within MaxClients
	CommandsProcessed int64
	RejectedClients   int64 // connections refused over MaxClients
	Panics            int64 // recovered handler or Decider panics
	ErrorReplies      int64 // error replies, protocol errors included
}

// Server is the RESP front end. Its methods are safe for concurrent use.
// Create it with New, run it with Serve or ListenAndServe, stop it with
// Shutdown; a Server serves once.
type Server struct {
	cfg     Config
	log     *slog.Logger
	cmds    commandTable
	started time.Time

	// ctx is passed to the Decider; it ends when Shutdown gives up.
	ctx    context.Context
	cancel context.CancelFunc

	keys  edge.Keys   // MaxKeyBytes
	users *acl.Holder // Config.Users, or the users of RequirePass and AdminPass

	nextID     atomic.Int64
	connected  atomic.Int64
	totalConns atomic.Int64
	commands   atomic.Int64
	rejected   atomic.Int64
	panics     atomic.Int64
	errReplies atomic.Int64

	closing  atomic.Bool
	inflight atomic.Int64
	idle     chan struct{} // signalled when inflight reaches 0 while closing

	mu      sync.Mutex
	ln      *listener
	served  chan struct{} // closed when Serve returns
	clients map[*connState]struct{}
}

// New validates cfg, fills in its defaults and returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Decider == nil {
		return nil, errors.New("server: Config.Decider is required")
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return nil, fmt.Errorf("server: Config.Addr %q: %w", cfg.Addr, err)
	}
	for _, err := range []error{
		orDefault("MaxClients", &cfg.MaxClients, DefaultMaxClients),
		orDefault("MaxRequestBytes", &cfg.MaxRequestBytes, DefaultMaxRequestBytes),
		orDefault("MaxKeyBytes", &cfg.MaxKeyBytes, DefaultMaxKeyBytes),
		orDefault("MaxOutputBytes", &cfg.MaxOutputBytes, DefaultMaxOutputBytes),
		orDefault("IdleTimeout", &cfg.IdleTimeout, 0),
		orDefault("RequestTimeout", &cfg.RequestTimeout, DefaultRequestTimeout),
		orDefault("WriteTimeout", &cfg.WriteTimeout, DefaultWriteTimeout),
		orDefault("ShutdownTimeout", &cfg.ShutdownTimeout, DefaultShutdownTimeout),
	} {
		if err != nil {
			return nil, err
		}
	}
	if cfg.MaxRequestBytes < minRequestBytes || cfg.MaxRequestBytes > maxRequestBytes {
		return nil, fmt.Errorf("server: Config.MaxRequestBytes must be between %d and %d, got %d", minRequestBytes, maxRequestBytes, cfg.MaxRequestBytes)
	}
	if cfg.MaxKeyBytes > cfg.MaxRequestBytes-64 {
		return nil, fmt.Errorf("server: Config.MaxKeyBytes %d does not fit in a request of MaxRequestBytes %d", cfg.MaxKeyBytes, cfg.MaxRequestBytes)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.TLS != nil {
		var err error
		if cfg.TLS, err = serverTLS(cfg.TLS); err != nil {
			return nil, err
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	users := cfg.Users
	if users != nil && (cfg.RequirePass != "" || cfg.AdminPass != "") {
		return nil, errors.New("server: Config.Users and Config.RequirePass or AdminPass are exclusive: give the users' passwords in Users")
	}
	if users == nil {
		users = acl.NewHolder(acl.FromFlags(cfg.RequirePass, cfg.AdminPass))
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg:     cfg,
		log:     log,
		cmds:    newCommandTable(),
		started: time.Now(),
		ctx:     ctx,
		cancel:  cancel,
		keys:    edge.NewKeys(cfg.MaxKeyBytes),
		users:   users,
		idle:    make(chan struct{}, 1),
		clients: map[*connState]struct{}{},
	}, nil
}

// ListenAndServe listens on Config.Addr and serves; see Serve.
func (s *Server) ListenAndServe() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return s.Serve(ln)
}

// Serve accepts connections on ln and serves them until Shutdown, after
// which it returns ErrServerClosed. It closes ln.
func (s *Server) Serve(ln net.Listener) error {
	if s.cfg.TLS != nil {
		ln = newTLSListener(ln, s.cfg.TLS, s.cfg.RequestTimeout)
	}
	gl := newListener(ln, s)
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		_ = ln.Close()
		return ErrServerClosed
	}
	if s.ln != nil {
		s.mu.Unlock()
		return errors.New("server: already serving")
	}
	s.ln = gl
	s.served = make(chan struct{})
	s.mu.Unlock()
	defer close(s.served)

	addr := ln.Addr()
	s.log.Info("serving RESP", "addr", addr.String(), "tls", s.cfg.TLS != nil)
	err := s.acceptLoop(gl)
	if s.closing.Load() {
		return ErrServerClosed
	}
	return fmt.Errorf("server: %w", err)
}

// acceptLoop serves every connection gl accepts on a goroutine of its own
// until gl is closed (or released by Shutdown); then it closes gl and every
// connection still open and returns why it stopped.
func (s *Server) acceptLoop(gl *listener) error {
	defer func() {
		_ = gl.Close()
		s.mu.Lock()
		for c := range s.clients {
			_ = c.w.(io.Closer).Close()
		}
		s.mu.Unlock()
	}()
	for {
		gc, err := gl.next()
		if errors.Is(err, net.ErrClosed) {
			return err
		}
		if err != nil {
			s.log.Warn("accept failed", "err", err)
			continue
		}
		c := s.newConnState(gc, gc.RemoteAddr().String(), gc.LocalAddr().String())
		s.mu.Lock()
		s.clients[c] = struct{}{}
		s.mu.Unlock()
		s.log.Debug("client connected", "id", c.id, "addr", c.addr)
		go s.serveConn(gc, c)
	}
}

// Addr returns the address the server listens on, or nil before Serve.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Shutdown stops accepting connections, lets the pipelines being executed
// finish (within ctx and Config.ShutdownTimeout), then closes every
// connection. Pipelines that arrive meanwhile are not run: their connection
// is closed. If the wait is cut short, the Decider's context is cancelled
// and Shutdown returns the context's error.
func (s *Server) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
	defer cancel()
	s.mu.Lock()
	first := !s.closing.Swap(true)
	ln, served := s.ln, s.served
	s.mu.Unlock()
	if ln == nil {
		s.cancel()
		return nil
	}
	if first {
		_ = ln.Listener.Close()
	}
	var err error
	for err == nil && s.inflight.Load() > 0 {
		select {
		case <-s.idle:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil {
		s.cancel()
	}
	ln.releaseAccept()
	select {
	case <-served:
	case <-ctx.Done():
		if err == nil {
			err = ctx.Err()
		}
	}
	s.cancel()
	return err
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	return Stats{
		ConnectedClients:  s.connected.Load(),
		TotalConnections:  s.totalConns.Load(),
		CommandsProcessed: s.commands.Load(),
		RejectedClients:   s.rejected.Load(),
		Panics:            s.panics.Load(),
		ErrorReplies:      s.errReplies.Load(),
	}
}

// begin counts a pipeline in flight; it reports false once Shutdown began.
func (s *Server) begin() bool {
	s.inflight.Add(1)
	if s.closing.Load() {
		s.end()
		return false
	}
	return true
}

func (s *Server) end() {
	if s.inflight.Add(-1) == 0 && s.closing.Load() {
		select {
		case s.idle <- struct{}{}:
		default:
		}
	}
}

// serveConn runs the pipelines of one connection until it ends.
func (s *Server) serveConn(gc *conn, c *connState) {
	var err error
	defer func() {
		_ = gc.Close()
		s.mu.Lock()
		delete(s.clients, c)
		s.mu.Unlock()
		s.logClosed(c, err)
	}()
	for {
		var cmds [][][]byte
		if cmds, err = gc.readPipeline(); err != nil {
			return
		}
		if !s.pipeline(c, cmds) {
			return
		}
	}
}

// logClosed logs why a connection ended.
func (s *Server) logClosed(c *connState, err error) {
	var v violation
	switch {
	case errors.As(err, &v):
		s.log.Debug("client closed for protocol violation", "id", c.id, "addr", c.addr, "err", err)
	case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed):
		s.log.Debug("client disconnected", "id", c.id, "addr", c.addr, "err", err)
	default:
		s.log.Debug("client disconnected", "id", c.id, "addr", c.addr)
	}
}

// clientList returns the open connections, for CLIENT LIST.
func (s *Server) clientList() []*connState {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := make([]*connState, 0, len(s.clients))
	for c := range s.clients {
		list = append(list, c)
	}
	slices.SortFunc(list, func(a, b *connState) int { return cmp.Compare(a.id, b.id) })
	return list
}

// pipeline executes the commands of one read together (batched and
// answered together) and writes their replies. It reports whether the
// connection goes on: not after QUIT, a failed write or a panic, nor once
// Shutdown has begun.
func (s *Server) pipeline(c *connState, cmds [][][]byte) (more bool) {
	start := time.Now()
	if !s.begin() {
		return false
	}
	defer s.end()
	defer func() {
		if r := recover(); r != nil {
			s.recovered(r, "pipeline")
			c.out = redcon.AppendError(c.out[:0], string(errInternal))
			c.flush()
			more = false
		}
	}()
	c.exec(cmds)
	// Write before the pipeline stops counting as in flight: Shutdown
	// closes connections as soon as nothing is.
	c.flush()
	if s.cfg.OnPipeline != nil {
		s.cfg.OnPipeline(time.Since(start), len(cmds))
	}
	if errors.Is(c.werr, os.ErrDeadlineExceeded) {
		s.log.Debug("client closed: replies not read within WriteTimeout", "id", c.id, "addr", c.addr)
	}
	return !c.quit && c.werr == nil
}

// recovered logs and counts a recovered panic.
func (s *Server) recovered(r any, where string) {
	s.panics.Add(1)
	s.log.Error("panic recovered", "in", where, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
}

// orDefault sets a zero Config field to def and refuses a negative one,
// naming it.
func orDefault[T int | time.Duration](name string, v *T, def T) error {
	if *v < 0 {
		return fmt.Errorf("server: Config.%s must not be negative, got %v", name, *v)
	}
	if *v == 0 {
		*v = def
	}
	return nil
}
