package rls

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"runtime/debug"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-rl/sluice/internal/acl"
	"github.com/sluice-rl/sluice/internal/edge"
	"github.com/sluice-rl/sluice/limit"
)

// Decider decides rate-limit requests; the limiter implements it. Both
// methods must be safe for concurrent use and take reqs[i].Policy as set.
type Decider interface {
	// Decide fills out[i] for reqs[i], one by one: here the check-only
	// descriptors (limit.OpPeek), and a request's one limited descriptor
	// (limit.OpTake, which may go a hot-key path).
	Decide(ctx context.Context, reqs []limit.Request, out []limit.Result)
	// MTake takes reqs all-or-nothing and reports whether every one was
	// admitted; an error fails the call and spends nothing.
	MTake(ctx context.Context, reqs []limit.Request, out []limit.Result) (bool, error)
}

// Config configures a Server. The zero value of each field means its
// default; Decider and Matcher are required.
type Config struct {
	// Decider decides; the limiter. Required.
	Decider Decider
	// Matcher finds each descriptor's policy. Required.
	Matcher Matcher
	// RequirePass, when not empty and Users is nil, is the "default"
	// user's password, which every call must carry as gRPC metadata
	// "authorization: Bearer <RequirePass>"; a call without it gets
	// Unauthenticated. Default: none.
	RequirePass string
	// Users, when not nil, are the users and their permissions (an ACL
	// file, or acl.FromFlags), loaded anew for every call so that a reload
	// applies at once; RequirePass is then ignored. A call authenticates
	// by its "authorization" metadata as the HTTP door's header (auth.go),
	// and every descriptor's key must be one the user may take (rl.take;
	// rl.peek for hits_addend 0), else the whole call is PermissionDenied.
	// Refusals go to Users' ACL LOG. Default: acl.FromFlags(RequirePass, "").
	Users *acl.Holder
	// TLS, when not nil, makes the server speak TLS only (it needs a
	// certificate; a MinVersion below TLS 1.2 is raised to it). Default:
	// plaintext HTTP/2.
	TLS *tls.Config
	// Headers adds the RateLimit-Policy and RateLimit response headers
	// (draft-ietf-httpapi-ratelimit-headers) to every reply with a limited
	// descriptor, for Envoy to pass to the client. Default false: Envoy's
	// filter writes its own from the statuses when asked
	// (enable_x_ratelimit_headers), and most replies go unread.
	Headers bool
	// MaxDescriptors bounds the descriptors of one request. Default 64,
	// RL.MTAKE's bound.
	MaxDescriptors int
	// MaxEntries bounds the entries of one descriptor. Default 16.
	MaxEntries int
	// MaxKeyBytes bounds the sluice key of one descriptor (its domain,
	// keys and values, escaped). Default 1024, as RESP's keys.
	MaxKeyBytes int
	// MaxRequestBytes bounds a request message; a larger one gets
	// ResourceExhausted before it is decoded. Default 131072 (128 KiB):
	// room for MaxDescriptors keys of MaxKeyBytes.
	MaxRequestBytes int
	// MaxConnections bounds the connections served at once; past it new
	// ones wait to be accepted. Default 10000, as RESP's MaxClients.
	MaxConnections int
	// MaxStreams bounds the calls in flight on one connection (HTTP/2
	// SETTINGS_MAX_CONCURRENT_STREAMS); Envoy queues or opens another
	// connection past it. Default 1024.
	MaxStreams uint32
	// MaxHeaderBytes bounds the metadata of one call (its HTTP/2 header
	// list, announced as SETTINGS_MAX_HEADER_LIST_SIZE): a call with more
	// is refused (RST_STREAM, or the connection closed when it sends far
	// more) before its token is checked or anything decided. Default 16 KiB
	// (edge.MaxHeaderBytes, the HTTP door's MaxHeaderBytes), where grpc's
	// own is 16 MiB.
	MaxHeaderBytes int
	// HandshakeTimeout bounds a new connection's TLS handshake and HTTP/2
	// preface; a connection that has not finished them is closed.
	// Default 10s (grpc's own is 120s).
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection that has had no call in flight for
	// this long (GOAWAY, then close; Envoy opens another when it needs
	// one). Default 2m, as the HTTP door's.
	IdleTimeout time.Duration
	// AuthTimeout, with RequirePass or Users, closes a connection on which
	// no call has authenticated within this long of its accept, if the
	// users in force then need credentials (no nopass default user): one
	// that sends nothing, or only calls that fail authentication, gives
	// its MaxConnections slot back. A connection that has authenticated
	// once is not checked again. Default 10s.
	AuthTimeout time.Duration
	// Logger receives recovered panics. Default: discard.
	Logger *slog.Logger
	// Tracer, when set, gives every call a server span that continues
	// the call's W3C traceparent metadata (trace.go); nil, the default,
	// is tracing off.
	Tracer trace.Tracer
}

// Defaults of Config.
const (
	DefaultMaxDescriptors   = 64
	DefaultMaxEntries       = 16
	DefaultMaxKeyBytes      = edge.DefaultMaxKeyBytes
	DefaultMaxRequestBytes  = 128 << 10
	DefaultMaxConnections   = edge.DefaultMaxConnections
	DefaultMaxStreams       = 1024
	DefaultMaxHeaderBytes   = edge.MaxHeaderBytes
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultIdleTimeout      = 2 * time.Minute
	DefaultAuthTimeout      = 10 * time.Second
)

// streamWorkers are the goroutines that run calls, kept from one call to
// the next (grpc.NumStreamWorkers): a call on a new goroutine grew its
// stack, copied twice, every time (a tenth of the door's CPU). A call that
// finds them all busy gets a goroutine of its own, as without them.
const streamWorkers = 64

// The flow-control windows of a call and of a connection: HTTP/2's
// default for a call (64 KiB, what grpc starts from), and room for many
// calls on a connection before a WINDOW_UPDATE (grpc's estimate grows a
// busy connection's to 16 MiB).
const (
	streamWindow = 64 << 10
	connWindow   = 1 << 20
)

// Server is Envoy's rate-limit service (v3) on gRPC. Create it with New,
// run it with Serve, stop it with Shutdown; it is safe for concurrent use.
type Server struct {
	rlsv3.UnimplementedRateLimitServiceServer

	cfg    Config
	log    *slog.Logger
	bounds bounds
	users  *acl.Holder // Users, or the users of RequirePass
	// authed is set when calls must show whose they are (RequirePass or
	// Users): connections are then wrapped to learn it (conns.go).
	authed bool
	grpc   *grpc.Server
	col    *collector // Decide calls of concurrent calls, joined
	panics atomic.Int64
	// expired counts the connections closed for not authenticating
	// within AuthTimeout.
	expired atomic.Int64
}

// orDefault sets a zero or negative *v to d: the Config rule, zero means
// the default.
func orDefault[T int | int64 | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// Server answers ShouldRateLimit; the embedded type answers the rest.
var _ rlsv3.RateLimitServiceServer = (*Server)(nil)

// New validates cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Decider == nil || cfg.Matcher == nil {
		return nil, errors.New("rls: Decider and Matcher are required")
	}
	orDefault(&cfg.MaxDescriptors, DefaultMaxDescriptors)
	orDefault(&cfg.MaxEntries, DefaultMaxEntries)
	orDefault(&cfg.MaxKeyBytes, DefaultMaxKeyBytes)
	orDefault(&cfg.MaxRequestBytes, DefaultMaxRequestBytes)
	orDefault(&cfg.MaxConnections, DefaultMaxConnections)
	if cfg.MaxStreams == 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	orDefault(&cfg.MaxHeaderBytes, DefaultMaxHeaderBytes)
	orDefault(&cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	orDefault(&cfg.IdleTimeout, DefaultIdleTimeout)
	orDefault(&cfg.AuthTimeout, DefaultAuthTimeout)
	users := cfg.Users
	if users == nil {
		users = acl.NewHolder(acl.FromFlags(cfg.RequirePass, ""))
	}
	s := &Server{cfg: cfg, log: cfg.Logger, users: users, authed: cfg.RequirePass != "" || cfg.Users != nil, col: newCollector(cfg.Decider),
		bounds: bounds{descriptors: cfg.MaxDescriptors, entries: cfg.MaxEntries, keyBytes: cfg.MaxKeyBytes}}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.col.traced = cfg.Tracer != nil
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(cfg.MaxRequestBytes),
		grpc.MaxConcurrentStreams(cfg.MaxStreams),
		grpc.MaxHeaderListSize(uint32(min(int64(cfg.MaxHeaderBytes), math.MaxUint32))),
		grpc.ConnectionTimeout(cfg.HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: cfg.IdleTimeout}),
		grpc.ChainUnaryInterceptor(s.intercept),
		grpc.NumStreamWorkers(streamWorkers),
		// Fixed flow-control windows turn off grpc's bandwidth estimate,
		// whose PING and its ack rode along with the DATA of nearly every
		// call: calls here are a few hundred bytes.
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
	}
	var creds credentials.TransportCredentials
	if cfg.TLS != nil {
		if len(cfg.TLS.Certificates) == 0 && cfg.TLS.GetCertificate == nil && cfg.TLS.GetConfigForClient == nil {
			return nil, errors.New("rls: Config.TLS has no certificate")
		}
		t := cfg.TLS.Clone()
		t.MinVersion = max(t.MinVersion, tls.VersionTLS12)
		creds = credentials.NewTLS(t)
	}
	if s.authed { // calls must name their connection (conns.go)
		if creds == nil {
			creds = insecure.NewCredentials()
		}
		creds = connCreds{creds}
	}
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	s.grpc = grpc.NewServer(opts...)
	rlsv3.RegisterRateLimitServiceServer(s.grpc, s)
	return s, nil
}

// Serve serves on ln until Shutdown; it returns nil after Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	ln = edge.LimitConnections(ln, s.cfg.MaxConnections)
	if s.authed {
		ln = &listener{Listener: ln, authTimeout: s.cfg.AuthTimeout, expired: &s.expired, required: s.credentialsRequired}
	}
	err := s.grpc.Serve(ln)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Shutdown stops accepting calls and waits for those in flight to finish,
// or for ctx to end, when it cuts them off and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
		return ctx.Err()
	}
}

// Panics is the number of panics recovered from calls since New.
func (s *Server) Panics() int64 { return s.panics.Load() }

// Batches is the Decide calls the door has made since New, and of the
// calls that asked for one, those that shared theirs with another call's.
func (s *Server) Batches() (decides, joined int64) {
	return s.col.decides.Load(), s.col.joined.Load()
}

// AuthTimeouts is the number of connections closed since New for not
// authenticating within AuthTimeout.
func (s *Server) AuthTimeouts() int64 { return s.expired.Load() }

// intercept authenticates every call and turns a panic into Internal, so a
// bug in one call never takes the process (and every other door) down.
func (s *Server) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	if s.cfg.Tracer != nil {
		var span trace.Span
		ctx, span = s.startSpan(ctx, info.FullMethod)
		defer func() { endSpan(span, err) }() // after the recover below has set err
	}
	defer func() {
		if r := recover(); r != nil {
			s.panics.Add(1)
			s.log.Error("panic in a gRPC call", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
			resp, err = nil, status.Error(codes.Internal, "internal error")
		}
	}()
	ctx, err = s.authenticate(ctx)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}
