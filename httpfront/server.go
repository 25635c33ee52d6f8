package httpfront

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-rl/sluice/internal/acl"
	"github.com/sluice-rl/sluice/internal/edge"
	"github.com/sluice-rl/sluice/limit"
)

// Decider decides batches of rate-limit requests; the limiter implements
// it. Decide fills out[i] for reqs[i] and sets reqs[i].Policy to the
// policy that decided it (the RateLimit headers name it); a failure of one
// item is its out[i].Err. Implementations must be safe for concurrent use
// and bound each call by their own deadline.
type Decider interface {
	Decide(ctx context.Context, reqs []limit.Request, out []limit.Result)
}

// Config configures a Server. The zero value of each field means its
// default; Decider is required.
type Config struct {
	// Decider decides every request. Required.
	Decider Decider
	// KeyHeader names the request header /v1/check takes the key from when
	// the query has no key (forward-auth). Default "X-RateLimit-Key".
	KeyHeader string
	// RequirePass, when not empty and Users is nil, is the "default"
	// user's password: it must come as "Authorization: Bearer
	// <RequirePass>" (or Basic with the user "default" or none); without
	// it every request is answered 401 with "WWW-Authenticate: Bearer".
	// Default: no password.
	RequirePass string
	// Users, when not nil, are the users and their permissions (an ACL
	// file, or acl.FromFlags), loaded anew for every request so that a
	// reload applies at once; RequirePass is then ignored. A request
	// authenticates as in auth.go and each endpoint checks its command
	// and every key it names (403 otherwise); refusals go to Users' ACL
	// LOG. Default: acl.FromFlags(RequirePass, "").
	Users *acl.Holder
	// TLS, when not nil, makes Serve speak HTTPS only (HTTP/1.1 and h2).
	// A MinVersion below TLS 1.2 is raised to it. Default nil: plain HTTP.
	TLS *tls.Config
	// MaxBodyBytes is the largest request body read; a larger one is
	// answered 413. Default 65536 (64 KiB), as RESP's --max-request-bytes.
	MaxBodyBytes int64
	// MaxKeyBytes is the longest key accepted, in bytes. Default 1024.
	MaxKeyBytes int
	// MaxBatch is the most requests one POST /v1/take array may hold; more
	// is answered 413 and nothing is decided. Default 100.
	MaxBatch int
	// MaxConnections bounds the connections served at once, as
	// --max-clients does for RESP; past it a new connection waits in the
	// listen backlog until one closes, so a flood of connections costs
	// the kernel's backlog, not goroutines and buffers here. Default 10000.
	MaxConnections int
	// MaxHeaderBytes bounds the request line and headers. Default 16 KiB
	// (edge.MaxHeaderBytes, the gRPC door's bound on metadata too).
	MaxHeaderBytes int
	// ReadHeaderTimeout bounds reading the request line and headers.
	// Default 5s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included.
	// Default 10s.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response. Default 10s.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long.
	// Default 2m.
	IdleTimeout time.Duration
	// Logger receives server errors (bad TLS handshakes and the like),
	// never per-request lines. Default: discard.
	Logger *slog.Logger
	// Tracer, when set, gives every request a server span that continues
	// the request's W3C traceparent (trace.go); nil, the default, is
	// tracing off.
	Tracer trace.Tracer
}

// Defaults of Config.
const (
	DefaultKeyHeader         = "X-RateLimit-Key"
	DefaultMaxBodyBytes      = 64 << 10
	DefaultMaxKeyBytes       = edge.DefaultMaxKeyBytes
	DefaultMaxBatch          = 100
	DefaultMaxHeaderBytes    = edge.MaxHeaderBytes
	DefaultMaxConnections    = edge.DefaultMaxConnections
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 10 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
)

// Server is the HTTP door. It is an http.Handler; Serve runs it on a
// listener with the configured limits. Its methods are safe for concurrent
// use.
type Server struct {
	cfg   Config
	keys  edge.Keys   // MaxKeyBytes
	users *acl.Holder // Users, or the users of RequirePass
	http  *http.Server
}

// New validates cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Decider == nil {
		return nil, errors.New("httpfront: Decider is required")
	}
	if cfg.KeyHeader == "" {
		cfg.KeyHeader = DefaultKeyHeader
	}
	cfg.KeyHeader = http.CanonicalHeaderKey(cfg.KeyHeader)
	if !validHeaderName(cfg.KeyHeader) {
		return nil, errors.New("httpfront: KeyHeader " + strconv.Quote(cfg.KeyHeader) + " is not a valid header name")
	}
	setDefault(&cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	setDefault(&cfg.MaxKeyBytes, DefaultMaxKeyBytes)
	setDefault(&cfg.MaxBatch, DefaultMaxBatch)
	setDefault(&cfg.MaxHeaderBytes, DefaultMaxHeaderBytes)
	setDefault(&cfg.MaxConnections, DefaultMaxConnections)
	setDefault(&cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	setDefault(&cfg.ReadTimeout, DefaultReadTimeout)
	setDefault(&cfg.WriteTimeout, DefaultWriteTimeout)
	setDefault(&cfg.IdleTimeout, DefaultIdleTimeout)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	users := cfg.Users
	if users == nil {
		users = acl.NewHolder(acl.FromFlags(cfg.RequirePass, ""))
	}
	s := &Server{cfg: cfg, keys: edge.NewKeys(cfg.MaxKeyBytes), users: users}
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
		// Every request's context says it came in by HTTP, for the
		// decision metrics' front label; set once, not per request.
		BaseContext: func(net.Listener) context.Context { return limit.WithFront(context.Background(), "http") },
	}
	if cfg.TLS != nil {
		t := cfg.TLS.Clone()
		t.MinVersion = max(t.MinVersion, tls.VersionTLS12)
		s.http.TLSConfig = t
	}
	return s, nil
}

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Serve accepts connections on ln until Shutdown; it returns
// http.ErrServerClosed after Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	ln = edge.LimitConnections(ln, s.cfg.MaxConnections)
	if s.http.TLSConfig != nil {
		return s.http.ServeTLS(ln, "", "")
	}
	return s.http.Serve(ln)
}

// Shutdown stops accepting and waits for requests in flight, until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.http.Shutdown(ctx) }

// validHeaderName reports whether name is an RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}
