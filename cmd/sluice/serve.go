package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/envoycfg"
	"github.com/sluice-rl/sluice/hotkey"
	"github.com/sluice-rl/sluice/httpfront"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/local"
	"github.com/sluice-rl/sluice/metrics"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/rls"
	"github.com/sluice-rl/sluice/server"
)

// The limiter answers every rate command, RL.MTAKE and CL.THROTTLE included.
var _ server.MultiDecider = (*limiter.Limiter)(nil)

type serveFlags struct {
	listen, admin, clusterAddrs, redisURL, config string
	envoyConfig                                   string
	timeout, idleTimeout, shutdownTimeout         time.Duration
	requestTimeout, writeTimeout                  time.Duration
	maxOutputBytes                                int
	requirePass, requirePassFile                  string
	maxClients, maxRequestBytes, maxKeyBytes      int
	storePipelines                                int
	storePerKey                                   bool
	leaseTTL                                      time.Duration
	logFormat, logLevel                           string
	httpAddr, httpKeyHeader                       string
	timeoutSet                                    bool
	grpc                                          string // Envoy's rate-limit service; "" = off
	grpcHeaders                                   bool
	securityFlags
	sentinelFlags
	regionFlags
}

func parseServeFlags(args []string, stderr io.Writer) (*serveFlags, error) {
	f := &serveFlags{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.listen, "listen", "127.0.0.1:6380", "RESP listen address")
	fs.StringVar(&f.admin, "admin", "127.0.0.1:9380", "HTTP address for /metrics, /healthz and /readyz (\"\" = off)")
	fs.StringVar(&f.clusterAddrs, "cluster", "", "Redis Cluster seed nodes, host:port[,host:port…]")
	fs.StringVar(&f.redisURL, "redis", "", "a single Redis node, redis://[user:pass@]host:port")
	fs.StringVar(&f.config, "config", "", "policy file (YAML); none = one built-in catch-all policy")
	fs.StringVar(&f.envoyConfig, "envoy-config", "", "directory of envoyproxy/ratelimit config files (*.yaml), reloaded on SIGHUP")
	fs.DurationVar(&f.timeout, "timeout", 50*time.Millisecond, "deadline of every store call (overrides the config's timeout)")
	fs.StringVar(&f.grpc, "grpc", "", "address of Envoy's rate-limit service (v3, gRPC), e.g. 127.0.0.1:8081 (\"\" = off)")
	fs.BoolVar(&f.grpcHeaders, "grpc-ratelimit-headers", false, "--grpc replies carry RateLimit-Policy and RateLimit response headers for Envoy to add")
	fs.StringVar(&f.requirePass, "requirepass", "", "password clients must AUTH with (prefer --requirepass-file or SLUICE_REQUIREPASS)")
	fs.StringVar(&f.requirePassFile, "requirepass-file", "", "file holding the password")
	f.registerSecurity(fs)
	f.registerSentinel(fs)
	fs.IntVar(&f.maxClients, "max-clients", 10000, "connections beyond this get -ERR max number of clients reached")
	fs.IntVar(&f.maxRequestBytes, "max-request-bytes", 64<<10, "a request larger than this closes its connection")
	fs.IntVar(&f.maxKeyBytes, "max-key-bytes", 1024, "longest key accepted")
	fs.IntVar(&f.storePipelines, "store-pipelines", 2, "pipelines in flight per Redis node; requests arriving meanwhile are batched into the next")
	fs.BoolVar(&f.storePerKey, "store-per-key", false, "send every decision by its own script call, not one batch script call per node pipeline (for comparison)")
	fs.DurationVar(&f.leaseTTL, "lease-ttl", 100*time.Millisecond, "how long leased tokens of a hot key may stay unused before they go back")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", 0, "close connections idle this long (0 = never)")
	fs.DurationVar(&f.requestTimeout, "request-timeout", 10*time.Second, "close a connection whose request is not complete this long after its first byte")
	fs.DurationVar(&f.writeTimeout, "write-timeout", 10*time.Second, "close a connection that does not take its replies within this long")
	fs.IntVar(&f.maxOutputBytes, "max-output-bytes", 1<<20, "replies a connection buffers before writing them out, mid-pipeline if need be")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 5*time.Second, "how long in-flight requests may take to finish on SIGTERM")
	fs.StringVar(&f.httpAddr, "http", "", "HTTP address of the JSON and 429 door, /v1/take and /v1/check (\"\" = off)")
	fs.StringVar(&f.httpKeyHeader, "http-key-header", httpfront.DefaultKeyHeader, "request header /v1/check takes the key from when the query has none (forward-auth)")
	f.regionFlags.register(fs)
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	fs.Visit(func(fl *flag.Flag) { f.timeoutSet = f.timeoutSet || fl.Name == "timeout" })
	if f.clusterAddrs != "" && f.redisURL != "" {
		return nil, errors.New("serve: --cluster and --redis are exclusive")
	}
	if err := f.resolveSentinel(); err != nil {
		return nil, err
	}
	if err := f.regionFlags.check(); err != nil {
		return nil, err
	}
	if f.timeout <= 0 {
		return nil, errors.New("serve: --timeout must be positive")
	}
	if f.requirePass == "" {
		f.requirePass = os.Getenv("SLUICE_REQUIREPASS")
	}
	if f.requirePassFile != "" {
		b, err := os.ReadFile(f.requirePassFile)
		if err != nil {
			return nil, fmt.Errorf("serve: --requirepass-file: %w", err)
		}
		f.requirePass = strings.TrimRight(string(b), "\r\n")
	}
	if err := f.resolveSecurity(); err != nil {
		return nil, err
	}
	return f, nil
}

func newLogger(f *serveFlags, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, fmt.Errorf("serve: --log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch f.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("serve: --log-format %q: want text or json", f.logFormat)
}

// policies adapts the reloadable holder to the limiter.
type policies struct{ h *policy.Holder }

func (p policies) Match(key string) *limit.Policy { return p.h.Current().Match(key) }

func serve(ctx context.Context, args []string, _, stderr io.Writer) error {
	f, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(f, stderr)
	if err != nil {
		return err
	}

	set := policy.Default()
	if f.config != "" {
		if set, err = policy.Load(f.config); err != nil {
			return err
		}
	}
	holder := policy.NewHolder(set)
	// envoy holds the Envoy rules, nil without --envoy-config; with it,
	// the gRPC door matches descriptors by them (startGRPC).
	envoy, err := loadEnvoy(f.envoyConfig)
	if err != nil {
		return err
	}
	timeout := func() time.Duration {
		if t := holder.Current().Timeout; !f.timeoutSet && t > 0 {
			return t
		}
		return f.timeout
	}

	m := metrics.New(version)
	store, mode, err := openStore(f, timeout(), m.Store)
	if err != nil {
		return err
	}
	defer store.Close()
	if mode == "sentinel" {
		if err := checkSentinel(ctx, store, f, log); err != nil {
			return err
		}
	}
	if mode == "embedded" {
		log.Warn("embedded mode: no --cluster, --redis or --sentinel, so limits are per process; two sluice processes admit twice the limit")
	} else if cs, ok := store.(*cluster.Store); ok {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if err := cs.Ping(pctx); err != nil {
			log.Warn("store not reachable at start; policies answer with on_store_error until it is", "err", err)
		}
		cancel()
	}

	rt := startPolicies(ctx, holder, set, store, log, func(err error) { m.ConfigReload(err == nil) })

	hot, err := hotkey.New(hotkey.Config{Store: store, LeaseTTL: f.leaseTTL, Timeout: timeout})
	if err != nil {
		return err
	}
	reg, home, err := openRegion(f, store, set, policies{holder}.Match, log)
	if err != nil {
		return err
	}
	decideBy := store
	if reg != nil {
		defer home.Close()
		defer reg.Close() // before the store's own Close: it gives the pools back
		decideBy = reg.Store()
	}
	lim, err := limiter.New(limiter.Config{Policies: policies{holder}, Store: decideBy, Timeout: timeout, Hot: hot,
		OnDecision: m.Decision, OnError: m.DecisionError})
	if err != nil {
		return err
	}
	srv, err := server.New(server.Config{
		Addr:            f.listen,
		Decider:         lim,
		Policies:        policyAdmin{rt},
		MaxClients:      f.maxClients,
		MaxRequestBytes: f.maxRequestBytes,
		MaxKeyBytes:     f.maxKeyBytes,
		RequirePass:     f.requirePass,
		AdminPass:       f.adminPass,
		TLS:             f.listenTLS,
		IdleTimeout:     f.idleTimeout,
		RequestTimeout:  f.requestTimeout,
		WriteTimeout:    f.writeTimeout,
		MaxOutputBytes:  f.maxOutputBytes,
		Logger:          log,
		Version:         version,
		Info: func(w io.Writer) {
			writeInfo(w, mode, holder, lim, store, hot, m)
			writeRegionInfo(w, reg)
		},
		HotKeys:    func() []server.HotKey { return hotKeys(hot) },
		Regions:    regionLines(reg),
		OnPipeline: m.Pipeline,
	})
	if err != nil {
		return err
	}
	if err := collectMetrics(m, store, hot, srv, holder, lim); err != nil {
		return err
	}
	if err := collectRegion(m, reg); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(holder.Current().String()), "\n") {
		log.Info("policy", "source", sourceOf(f.config), "rule", strings.TrimSpace(line))
	}
	logEnvoyRules(log, f.envoyConfig, envoy)

	var adminSrv *http.Server
	if f.admin != "" {
		aln, err := net.Listen("tcp", f.admin)
		if err != nil {
			ln.Close()
			return fmt.Errorf("serve: --admin: %w", err)
		}
		adminSrv = &http.Server{Handler: adminHandler(store, mode, timeout, holder, m), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = adminSrv.Serve(aln) }()
		log.Info("admin listening", "addr", aln.Addr().String())
	}

	httpSrv, err := startHTTP(f, lim, log)
	if err != nil {
		ln.Close()
		if adminSrv != nil {
			adminSrv.Close()
		}
		return err
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			reloadEnvoy(log, f.envoyConfig, envoy, m.ConfigReload)
			if f.config == "" {
				if f.envoyConfig == "" {
					log.Warn("SIGHUP: no --config to reload")
				}
				continue
			}
			s, err := policy.Load(f.config)
			if err == nil {
				err = rt.SetFile(s)
			}
			m.ConfigReload(err == nil)
			if err != nil {
				log.Error("config reload failed; keeping the last good config", "err", err)
			} else {
				log.Info("config reloaded", "file", f.config, "policies", len(s.Policies), "timeout", timeout().String())
			}
		}
	}()

	errc := make(chan error, 2)
	grpcSrv, err := startGRPC(f, lim, holder, envoy, log, errc)
	if err != nil {
		ln.Close()
		return err
	}
	go func() { errc <- srv.Serve(ln) }()
	log.Info("sluice listening", "addr", ln.Addr().String(), "store", mode, "timeout", timeout().String(), "version", version)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", f.shutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), f.shutdownTimeout)
	defer cancel()
	if adminSrv != nil {
		_ = adminSrv.Shutdown(sctx)
	}
	if httpSrv != nil {
		if err := httpSrv.Shutdown(sctx); err != nil {
			log.Warn("http shutdown", "err", err)
		}
	}
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown", "err", err)
	}
	if grpcSrv != nil {
		if err := grpcSrv.Shutdown(sctx); err != nil {
			log.Warn("grpc shutdown", "err", err)
		}
	}
	if err := hot.Close(sctx); err != nil {
		log.Warn("returning leased tokens", "err", err)
	}
	log.Info("stopped")
	return nil
}

// startHTTP starts the HTTP door of --http, nil when it is off: the same
// limiter, password, TLS and size limits as --listen.
func startHTTP(f *serveFlags, lim *limiter.Limiter, log *slog.Logger) (*httpfront.Server, error) {
	if f.httpAddr == "" {
		return nil, nil
	}
	hs, err := httpfront.New(httpfront.Config{
		Decider: lim, KeyHeader: f.httpKeyHeader, RequirePass: f.requirePass, TLS: f.listenTLS,
		MaxBodyBytes: int64(f.maxRequestBytes), MaxKeyBytes: f.maxKeyBytes, MaxConnections: f.maxClients,
		ReadTimeout: f.requestTimeout, WriteTimeout: f.writeTimeout, IdleTimeout: f.idleTimeout, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("serve: --http: %w", err)
	}
	hln, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		return nil, fmt.Errorf("serve: --http: %w", err)
	}
	go func() { _ = hs.Serve(hln) }()
	log.Info("http listening", "addr", hln.Addr().String(), "tls", f.listenTLS != nil)
	return hs, nil
}

// startGRPC serves Envoy's rate-limit service on --grpc, when set, with
// the RESP door's password (as a bearer token) and TLS; Serve's error goes
// to errc. Descriptors are matched by the --envoy-config rules when given
// (the whole request at once: replaces, shared counters), else against
// sluice's own policies by their keys.
func startGRPC(f *serveFlags, lim *limiter.Limiter, holder *policy.Holder, envoy *envoycfg.Holder, log *slog.Logger, errc chan<- error) (*rls.Server, error) {
	if f.grpc == "" {
		return nil, nil
	}
	matcher := rls.PolicyMatcher(policies{holder}.Match)
	if envoy != nil {
		matcher = envoy
	}
	gsrv, err := rls.New(rls.Config{Decider: lim, Matcher: matcher,
		RequirePass: f.requirePass, TLS: f.listenTLS, Headers: f.grpcHeaders, MaxKeyBytes: f.maxKeyBytes, MaxConnections: f.maxClients, Logger: log})
	if err != nil {
		return nil, err
	}
	gln, err := net.Listen("tcp", f.grpc)
	if err != nil {
		return nil, fmt.Errorf("serve: --grpc: %w", err)
	}
	go func() {
		if err := gsrv.Serve(gln); err != nil {
			errc <- fmt.Errorf("serve: --grpc: %w", err)
		}
	}()
	log.Info("grpc listening", "addr", gln.Addr().String(), "tls", f.listenTLS != nil)
	return gsrv, nil
}

func hotKeys(hot *hotkey.Layer) []server.HotKey {
	hk := hot.HotKeys()
	out := make([]server.HotKey, len(hk))
	for i, k := range hk {
		out[i] = server.HotKey{Key: k.Key, Policy: k.Policy, Mode: string(k.Mode), Rate: k.Rate, Since: k.Since}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rate > out[j].Rate })
	return out
}

func sourceOf(path string) string {
	if path == "" {
		return "built-in"
	}
	return path
}

// openStore picks the store: a cluster, a single node, a primary under
// Sentinel, or in-process.
func openStore(f *serveFlags, timeout time.Duration, obs cluster.Observer) (limit.Store, string, error) {
	switch {
	case f.sentinel != "":
		s, err := f.openSentinel(timeout, obs)
		return s, "sentinel", err
	case f.clusterAddrs != "":
		s, err := f.newStore(cluster.Config{Addrs: strings.Split(f.clusterAddrs, ","), Timeout: timeout, Pipelines: f.storePipelines, PerKey: f.storePerKey, Observer: obs}, &f.store)
		return s, "cluster", err
	case f.redisURL != "":
		u := f.redisURL
		if !strings.Contains(u, "://") {
			u = "redis://" + u
		}
		s, err := f.newStore(cluster.Config{URL: u, Timeout: timeout, Pipelines: f.storePipelines, PerKey: f.storePerKey, Observer: obs}, &f.store)
		return s, "redis", err
	}
	return local.New(local.Config{DecidedBy: limit.ByEmbedded}), "embedded", nil
}

func adminHandler(store limit.Store, mode string, timeout func() time.Duration, h *policy.Holder, m *metrics.Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		cs, ok := store.(*cluster.Store)
		if !ok {
			fmt.Fprintln(w, "ok", mode)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), max(timeout(), 500*time.Millisecond))
		defer cancel()
		if err := cs.Ping(ctx); err != nil {
			readyWithoutStore(w, h.Current(), mode, err)
			return
		}
		fmt.Fprintln(w, "ok", mode)
	})
	return mux
}

// writeRequestDurations writes the histogram of sluice's own time per
// request (sluice_request_duration_seconds) as one INFO line of cumulative
// counts by upper bound in µs: request_duration_us:le_100=N,…,le_inf=N.
func writeRequestDurations(w io.Writer, m *metrics.Metrics) {
	bounds, counts := m.RequestDurations()
	if len(bounds) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("request_duration_us:")
	for i, le := range bounds {
		if i > 0 {
			b.WriteByte(',')
		}
		if math.IsInf(le, 1) {
			fmt.Fprintf(&b, "le_inf=%d", counts[i])
		} else {
			fmt.Fprintf(&b, "le_%d=%d", int64(math.Round(le*1e6)), counts[i])
		}
	}
	b.WriteString("\r\n")
	_, _ = io.WriteString(w, b.String())
}

// writeInfo appends sluice's own INFO section.
func writeInfo(w io.Writer, mode string, h *policy.Holder, lim *limiter.Limiter, store limit.Store, hot *hotkey.Layer, m *metrics.Metrics) {
	s := lim.Snapshot()
	fmt.Fprintf(w, "# Sluice\r\nstore:%s\r\npolicies:%d\r\ndecisions:%d\r\nallowed:%d\r\nrejected:%d\r\nerror_replies:%d\r\nstore_errors:%d\r\n",
		mode, len(h.Current().Policies), s.Decisions, s.Allowed, s.Rejected, s.Errors, s.StoreErrors)
	writeRequestDurations(w, m)
	paths := make([]string, 0, len(s.ByPath))
	for p := range s.ByPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(w, "decided_by_%s:%d\r\n", strings.ReplaceAll(p, "-", "_"), s.ByPath[p])
	}
	fmt.Fprintf(w, "mtakes:%d\r\nmtake_refunds:%d\r\nmtake_refund_errors:%d\r\n", s.MTakes, s.Refunds, s.RefundFails)
	fmt.Fprintf(w, "goroutines:%d\r\n", runtime.NumGoroutine())
	hs := hot.Stats()
	fmt.Fprintf(w, "hot_keys:%d\r\nlease_hits:%d\r\nlease_rejects:%d\r\nlease_claims:%d\r\nlease_tokens_claimed:%d\r\nlease_returns:%d\r\nlease_tokens_returned:%d\r\nlease_return_errors:%d\r\nsplit_decisions:%d\r\nsplit_retries:%d\r\nsplit_handoffs:%d\r\n",
		hs.HotKeys, hs.LeaseHits, hs.LeaseRejects, hs.Claims, hs.TokensClaimed, hs.Returns, hs.TokensReturned, hs.ReturnErrors, hs.SplitDecisions, hs.SplitRetries, hs.SplitHandoffs)
	if cs, ok := store.(*cluster.Store); ok {
		for _, n := range cs.Stats() {
			avg, perCall := 0.0, 0.0
			if n.Pipelines > 0 {
				avg = float64(n.Commands) / float64(n.Pipelines)
			}
			if n.Commands > 0 {
				perCall = float64(n.Decisions) / float64(n.Commands)
			}
			fmt.Fprintf(w, "node_%s:breaker=%s,pipelines=%d,commands=%d,decisions=%d,avg_batch=%.2f,decisions_per_call=%.2f,overload=%d,breaker_opens=%d,pipeline_us=%.1f,decision_us=%.2f\r\n",
				n.Addr, n.Breaker, n.Pipelines, n.Commands, n.Decisions, avg, perCall, n.Overload, n.BreakerOpens, float64(n.PipelineCost)/1e3, float64(n.Service)/1e3)
		}
	}
}
