package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/httpfront"
	"github.com/sluice-rl/sluice/rls"
)

// startDoors opens --admin, --http and --grpc, those that are on; on an
// error it closes those it opened.
func (a *App) startDoors() error {
	err := a.startAdmin()
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
		if a.http != nil {
			_ = a.http.Shutdown(context.Background())
		}
	}
	return err
}

// startAdmin serves /metrics, /healthz, /readyz and /debug/pprof on
// --admin, when set.
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
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		cs, ok := a.store.(*cluster.Store)
		if !ok {
			fmt.Fprintln(w, "ok", a.mode)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), max(a.timeout(), 500*time.Millisecond))
		defer cancel()
		if err := cs.Ping(ctx); err != nil {
			readyWithoutStore(w, a.holder.Current(), a.mode, err)
			return
		}
		fmt.Fprintln(w, "ok", a.mode)
	})
	return mux
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
		ReadTimeout: c.RequestTimeout, WriteTimeout: c.WriteTimeout, IdleTimeout: c.IdleTimeout, Logger: a.log,
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
		Users: a.users, TLS: c.listenTLS, Headers: c.GRPCHeaders, MaxKeyBytes: c.MaxKeyBytes, MaxConnections: c.MaxClients, Logger: a.log})
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
