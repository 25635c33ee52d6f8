package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"time"

	"github.com/sluice-rl/sluice/httpfront"
	"github.com/sluice-rl/sluice/rls"
)

// startDoors opens --admin, --http and --grpc, those that are on; on an
// error it closes those it opened.
func (a *App) startDoors() error {
	err := a.startAdmin()
	if err == nil {
		err = a.startPprof()
	}
	if err == nil {
		err = a.startHTTP()
	}
	if err == nil {
		err = a.startGRPC()
	}
	if err != nil {
		if a.admin != nil {
			a.admin.Close()
		}
		if a.pprof != nil {
			a.pprof.Close()
		}
		if a.http != nil {
			_ = a.http.Shutdown(context.Background())
		}
	}
	return err
}

// startAdmin serves /metrics, /healthz and /readyz on --admin, when set;
// never /debug/pprof, which has a listener of its own (startPprof).
func (a *App) startAdmin() error {
	if a.cfg.Admin == "" {
		return nil
	}
	aln, err := net.Listen("tcp", a.cfg.Admin)
	if err != nil {
		return fmt.Errorf("serve: --admin: %w", err)
	}
	a.admin = &http.Server{Handler: a.adminHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = a.admin.Serve(aln) }()
	a.log.Info("admin listening", "addr", aln.Addr().String())
	return nil
}

// adminHandler answers the admin endpoints. /readyz pings the store
// (within the store timeout, 500 ms at least): see readyWithoutStore for
// the answer when it does not answer.
func (a *App) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", a.m.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		p, ok := a.store.(pinger)
		if !ok {
			fmt.Fprintln(w, "ok", a.mode)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), max(a.timeout(), 500*time.Millisecond))
		defer cancel()
		if err := p.Ping(ctx); err != nil {
			readyWithoutStore(w, a.holder.Current(), a.mode, err)
			return
		}
		fmt.Fprintln(w, "ok", a.mode)
	})
	return mux
}

// startPprof serves Go's profiling endpoints, /debug/pprof/, on --pprof,
// when set (off by default). They are a listener of their own rather
// than a switch on --admin: the image and the Compose file put --admin on
// 0.0.0.0 for Prometheus to scrape, and a profile (CPU for 30 s on
// request, goroutine stacks, the command line) is nobody's business
// beyond the host. An address that is not loopback is served, with a
// warning.
func (a *App) startPprof() error {
	if a.cfg.Pprof == "" {
		return nil
	}
	pln, err := net.Listen("tcp", a.cfg.Pprof)
	if err != nil {
		return fmt.Errorf("serve: --pprof: %w", err)
	}
	if ap, err := netip.ParseAddrPort(pln.Addr().String()); err != nil || !ap.Addr().IsLoopback() {
		a.log.Warn("pprof is served beyond loopback: anyone who reaches it can profile this process", "addr", pln.Addr().String())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	a.pprof = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = a.pprof.Serve(pln) }()
	a.log.Info("pprof listening", "addr", pln.Addr().String())
	return nil
}

// startHTTP starts the HTTP door of --http, when set: the same limiter,
// users (a.users, read per request, so a reload applies at once), TLS and
// size limits as --listen.
func (a *App) startHTTP() error {
	c := &a.cfg
	if c.HTTP == "" {
		return nil
	}
	hs, err := httpfront.New(httpfront.Config{
		Decider: a.lim, KeyHeader: c.HTTPKeyHeader, Users: a.users, TLS: c.listenTLS,
		MaxBodyBytes: int64(c.MaxRequestBytes), MaxKeyBytes: c.MaxKeyBytes, MaxConnections: c.MaxClients,
		ReadTimeout: c.RequestTimeout, WriteTimeout: c.WriteTimeout, IdleTimeout: c.IdleTimeout, Logger: a.log, Tracer: c.tracer,
	})
	if err != nil {
		return fmt.Errorf("serve: --http: %w", err)
	}
	hln, err := net.Listen("tcp", c.HTTP)
	if err != nil {
		return fmt.Errorf("serve: --http: %w", err)
	}
	a.http = hs
	go func() { _ = hs.Serve(hln) }()
	a.log.Info("http listening", "addr", hln.Addr().String(), "tls", c.listenTLS != nil)
	return nil
}

// startGRPC serves Envoy's rate-limit service on --grpc, when set, with
// the RESP door's users (a.users: a bearer token, user:password or the
// default user's password, checked per call) and TLS; Serve's error goes
// to Err. Descriptors are matched by the --envoy-config rules when given
// (the whole request at once: replaces, shared counters), else against
// sluice's own policies by their keys.
func (a *App) startGRPC() error {
	c := &a.cfg
	if c.GRPC == "" {
		return nil
	}
	matcher := rls.PolicyMatcher(policies{a.holder}.Match)
	if a.envoy != nil {
		matcher = a.envoy
	}
	gsrv, err := rls.New(rls.Config{Decider: a.lim, Matcher: matcher,
		Users: a.users, TLS: c.listenTLS, Headers: c.GRPCHeaders, MaxKeyBytes: c.MaxKeyBytes, MaxConnections: c.MaxClients, Logger: a.log, Tracer: c.tracer})
	if err != nil {
		return err
	}
	gln, err := net.Listen("tcp", c.GRPC)
	if err != nil {
		return fmt.Errorf("serve: --grpc: %w", err)
	}
	a.grpc = gsrv
	go func() {
		if err := gsrv.Serve(gln); err != nil {
			a.errc <- fmt.Errorf("serve: --grpc: %w", err)
		}
	}()
	a.log.Info("grpc listening", "addr", gln.Addr().String(), "tls", c.listenTLS != nil)
	return nil
}
