package app

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/denycache"
	"github.com/sluice-rl/sluice/envoycfg"
	"github.com/sluice-rl/sluice/hotkey"
	"github.com/sluice-rl/sluice/httpfront"
	"github.com/sluice-rl/sluice/internal/acl"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/metrics"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/region"
	"github.com/sluice-rl/sluice/rls"
	"github.com/sluice-rl/sluice/server"
)

// The limiter answers every rate command, RL.MTAKE and CL.THROTTLE included.
var _ server.MultiDecider = (*limiter.Limiter)(nil)

// App is one sluice server: its store, policies, limiter and doors. New
// builds it, Start opens the doors, Reload re-reads the files (SIGHUP),
// Shutdown stops it gracefully and Close releases the stores. Reload may
// run beside the doors; the other methods are called one after another.
type App struct {
	cfg    Config
	log    *slog.Logger
	m      *metrics.Metrics
	holder *policy.Holder
	users  *acl.Holder      // the users every door checks; swapped by Reload and ACL LOAD
	envoy  *envoycfg.Holder // nil without --envoy-config
	store  limit.Store
	mode   storeMode
	rt     *policy.Runtime
	hot    *hotkey.Layer
	deny   *denycache.Cache // not used by the limiter in embedded mode: there is no shard to spare
	reg    *region.Layer    // nil without --region
	home   *cluster.Store   // nil without --region
	lim    *limiter.Limiter
	srv    *server.Server
	admin  *http.Server      // nil until Start, or with --admin ""
	pprof  *http.Server      // nil until Start, or without --pprof
	http   *httpfront.Server // nil until Start, or without --http
	grpc   *rls.Server       // nil until Start, or without --grpc
	addr   net.Addr          // --listen's, once Start has listened
	errc   chan error        // a door that stopped serving

	reloadMu  sync.Mutex // held by each reload: SIGHUP's and the file watch's
	watch     *watch     // nil without --watch-config or without files
	watchStop func()     // ends the watch and waits for it; nil until Start

	tp *sdktrace.TracerProvider // nil: tracing off (tracing.go)
}

// New builds the server of cfg: the policies (the --config file, else the
// built-in one), the store, which it asks for the primary (Sentinel) or
// pings once, within ctx, and everything that decides. A --config or
// --envoy-config that does not load, or a store that cannot be set up,
// is an error; a store that does not answer yet is only a warning. Load
// has refused flags that contradict each other: New does not ask again.
func New(ctx context.Context, cfg Config) (_ *App, err error) {
	if err := cfg.derive(); err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()), errc: make(chan error, 2)}
	a.watch = a.newWatch() // before the files are read: a change from now on is seen
	if err := cfg.checkUsers(); err != nil {
		return nil, err
	}
	users, err := cfg.LoadUsers()
	if err != nil {
		return nil, err
	}
	a.users = acl.NewHolder(users)
	set := policy.Default()
	if cfg.PolicyFile != "" {
		if set, err = policy.Load(cfg.PolicyFile); err != nil {
			return nil, err
		}
	}
	a.holder = policy.NewHolder(set)
	// With --envoy-config the gRPC door matches descriptors by its rules.
	if a.envoy, err = loadEnvoy(cfg.EnvoyConfig); err != nil {
		return nil, err
	}
	a.m = metrics.New(cfg.Version)
	if err := a.startTracing(); err != nil {
		return nil, err
	}
	store, mode, err := a.cfg.openStore(a.timeout(), storeObserver{a.m.Store})
	if err != nil {
		a.Close()
		return nil, err
	}
	a.store, a.mode = store, mode
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	if err := policy.CheckSet(set, durabilityCheck(mode)); err != nil {
		return nil, err
	}
	if err := a.checkStore(ctx); err != nil {
		return nil, err
	}
	warnDurability(ctx, a.store, set, a.log)
	a.rt = newRuntime(a.holder, set, a.store, a.log, func(err error) { a.m.ConfigReload(err == nil) })
	a.rt.Check = durabilityCheck(mode)
	if err := a.wire(set); err != nil {
		return nil, err
	}
	return a, nil
}

// pinger is a store that can be asked whether it answers (cluster.Store):
// checkStore at start, /readyz after.
type pinger interface {
	Ping(ctx context.Context) error
}

// checkStore asks the sentinels for the primary, or pings the store once,
// and warns when it does not answer.
func (a *App) checkStore(ctx context.Context) error {
	if a.mode == modeSentinel {
		if err := checkSentinel(ctx, a.store, &a.cfg, a.log); err != nil {
			return err
		}
	}
	if a.mode == modeEmbedded {
		a.log.Warn("embedded mode: no --cluster, --redis or --sentinel, so limits are per process; two sluice processes admit twice the limit")
	} else if p, ok := a.store.(pinger); ok {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if err := p.Ping(pctx); err != nil {
			a.log.Warn("store not reachable at start; policies answer with on_store_error until it is", "err", err)
		}
		cancel()
	}
	return nil
}

// wire builds what decides, from the hot-key layer and the region to the
// RESP server, and registers their metrics.
func (a *App) wire(set *policy.Set) error {
	var err error
	if a.hot, err = hotkey.New(hotkey.Config{Store: a.store, LeaseTTL: a.cfg.LeaseTTL, Timeout: a.timeout}); err != nil {
		return err
	}
	if a.deny, err = denycache.New(denycache.Config{}); err != nil {
		return err
	}
	a.holder.OnChange(a.policiesChanged)
	var deny limiter.DenyCache
	if a.mode != modeEmbedded {
		deny = a.deny
	}
	if a.reg, a.home, err = openRegion(&a.cfg, a.store, set, policies{a.holder}, a.log); err != nil {
		return err
	}
	decideBy := a.store
	if a.reg != nil {
		decideBy = a.reg.Store()
	}
	a.lim, err = limiter.New(limiter.Config{Policies: policies{a.holder}, Store: decideBy, Timeout: a.timeout, Hot: a.hot, Deny: deny,
		OnDecision: a.m.Decision, OnError: a.m.DecisionError, OnCorrection: a.m.Correction, Slots: slotStore(a.store), Tracer: a.cfg.tracer})
	if err != nil {
		return err
	}
	c := &a.cfg
	a.srv, err = server.New(server.Config{
		Addr: c.Listen, Decider: a.lim, Policies: policyAdmin{a.rt},
		MaxClients: c.MaxClients, MaxRequestBytes: c.MaxRequestBytes, MaxKeyBytes: c.MaxKeyBytes,
		Users: a.users, LoadUsers: a.loadACLFile, TLS: c.listenTLS,
		IdleTimeout: c.IdleTimeout, RequestTimeout: c.RequestTimeout, WriteTimeout: c.WriteTimeout,
		MaxOutputBytes: c.MaxOutputBytes, Logger: a.log, Version: c.Version,
		Info: func(w io.Writer) {
			writeInfo(w, a.mode, a.holder, a.lim, a.store, a.hot, a.m)
			writeDenyInfo(w, a.deny)
			writeSlotInfo(w, a.lim)
			writeRegionInfo(w, a.reg)
			writeDurabilityInfo(w, a.store)
		},
		HotKeys:    func() []server.HotKey { return hotKeys(a.hot) },
		Regions:    regionLines(a.reg),
		OnPipeline: a.m.Pipeline,
	})
	if err != nil {
		return err
	}
	a.users.Log().Notify(countRefusal(a.m, policies{a.holder}))
	if err := collectMetrics(a.m, a.store, a.hot, a.deny, a.srv, a.holder, a.lim); err != nil {
		return err
	}
	return collectRegion(a.m, a.reg)
}

// policiesChanged is the policy holder's change hook: it runs on every
// change of the policies in force (reload, SIGHUP, the config watch,
// RL.POLICY SET or DEL here or on another instance), before the first
// request decided under the new ones. The deny cache's refusals and the
// leased tokens were decided and claimed under the old ones.
func (a *App) policiesChanged() {
	a.deny.Clear()
	a.hot.PoliciesChanged()
}

// timeout is the deadline of every store call now: --timeout, else the
// policy file's, else limit.DefaultTimeout.
func (a *App) timeout() time.Duration { return a.cfg.TimeoutIn(a.holder.Current()) }

// Start keeps the runtime policies in step with the store until ctx ends,
// prints the policies in force and opens every door: RESP on --listen,
// --admin, --http and --grpc. A door that stops serving later says so on
// Err.
func (a *App) Start(ctx context.Context) error {
	go a.rt.Run(ctx, policySync)
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(a.holder.Current().String()), "\n") {
		a.log.Info("policy", "source", sourceOf(a.cfg.PolicyFile), "rule", strings.TrimSpace(line))
	}
	logEnvoyRules(a.log, a.cfg.EnvoyConfig, a.envoy)
	if err := a.startDoors(); err != nil {
		ln.Close()
		return err
	}
	a.startWatch(ctx)
	a.addr = ln.Addr()
	go func() { a.errc <- a.srv.Serve(ln) }()
	a.log.Info("sluice listening", "addr", ln.Addr().String(), "store", a.mode, "timeout", a.timeout().String(), "version", a.cfg.Version)
	return nil
}

// Addr is the address RESP is served on, nil before Start: --listen's,
// with the port chosen when it asked for port 0.
func (a *App) Addr() net.Addr { return a.addr }

// Err delivers the error of a door that stopped serving.
func (a *App) Err() <-chan error { return a.errc }

// Users are the users and permissions every door checks: the --aclfile's
// or those of --requirepass and --admin-pass. Reload and ACL LOAD store a
// new List in it; a door loads it per request.
func (a *App) Users() *acl.Holder { return a.users }

// loadACLFile is ACL LOAD: it re-reads --aclfile and puts its users in
// force, or keeps the last good ones and says why (logged, counted in
// sluice_config_reloads_total, and the error is ACL LOAD's reply). The error names file:line and the rule, never a
// password.
func (a *App) loadACLFile() error {
	if a.cfg.ACLFile == "" {
		return errors.New("no --aclfile")
	}
	l, err := LoadACLFile(a.cfg.ACLFile)
	a.m.ConfigReload(err == nil)
	if err != nil {
		a.log.Error("aclfile reload failed; keeping the last good users", "err", err)
		return err
	}
	a.users.Store(l)
	a.log.Info("aclfile reloaded", "file", a.cfg.ACLFile, "users", len(l.Names()))
	return nil
}

// Reload re-reads --envoy-config, --aclfile and --config (SIGHUP), each
// keeping its last good rules on error, and logs and counts the outcome.
// The connections of users the new --aclfile deletes are closed. The file
// watch (--watch-config) reloads each of them by the same functions.
func (a *App) Reload() error {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	a.watch.seen()
	a.reloadEnvoyConfig()
	aclErr := a.reloadACL()
	if a.cfg.PolicyFile == "" {
		if aclErr != nil {
			return aclErr
		}
		if a.cfg.EnvoyConfig == "" && a.cfg.ACLFile == "" {
			a.log.Warn("SIGHUP: no --config to reload")
		}
		return nil
	}
	if err := a.reloadPolicies(); err != nil {
		return err
	}
	return aclErr
}

// reloadEnvoyConfig re-reads --envoy-config, if given.
func (a *App) reloadEnvoyConfig() { reloadEnvoy(a.log, a.cfg.EnvoyConfig, a.envoy, a.m.ConfigReload) }

// reloadACL re-reads --aclfile, if given, as ACL LOAD does, and closes the
// connections of the users it deleted.
func (a *App) reloadACL() error {
	if a.cfg.ACLFile == "" {
		return nil
	}
	err := a.loadACLFile()
	if err == nil {
		a.srv.UsersChanged()
	}
	return err
}

// reloadPolicies re-reads --config and puts it in force, or keeps the last
// good config and says why.
func (a *App) reloadPolicies() error {
	s, err := policy.Load(a.cfg.PolicyFile)
	if err == nil {
		err = a.rt.SetFile(s)
	}
	a.m.ConfigReload(err == nil)
	if err != nil {
		a.log.Error("config reload failed; keeping the last good config", "err", err)
		return err
	}
	a.log.Info("config reloaded", "file", a.cfg.PolicyFile, "policies", len(s.Policies), "timeout", a.timeout().String())
	warnDurability(context.Background(), a.store, s, a.log)
	return nil
}

// Shutdown lets in-flight requests finish, for --shutdown-timeout at most
// (or until ctx ends), gives leased tokens back and closes the stores.
func (a *App) Shutdown(ctx context.Context) error {
	defer a.Close()
	a.stopWatch()
	a.log.Info("shutting down", "grace", a.cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(ctx, a.cfg.ShutdownTimeout)
	defer cancel()
	if a.admin != nil {
		_ = a.admin.Shutdown(sctx)
	}
	if a.pprof != nil {
		_ = a.pprof.Close() // a CPU profile in progress would hold Shutdown for its 30 s
	}
	if a.http != nil {
		if err := a.http.Shutdown(sctx); err != nil {
			a.log.Warn("http shutdown", "err", err)
		}
	}
	if err := a.srv.Shutdown(sctx); err != nil {
		a.log.Warn("shutdown", "err", err)
	}
	if a.grpc != nil {
		if err := a.grpc.Shutdown(sctx); err != nil {
			a.log.Warn("grpc shutdown", "err", err)
		}
	}
	if err := a.hot.Close(sctx); err != nil {
		a.log.Warn("returning leased tokens", "err", err)
	}
	a.stopTracing(sctx) // the spans of the last requests go out
	a.log.Info("stopped")
	return nil
}

// Close ends the file watch (waiting for a reload in progress, if any)
// and releases the stores without waiting for anything else: the region
// first, as it gives its pools back, then home and the store.
func (a *App) Close() {
	a.stopWatch()
	if a.tp != nil { // not shut down: New failed, or Close without Shutdown
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // without waiting: what is queued is dropped
		a.stopTracing(ctx)
	}
	if a.reg != nil {
		_ = a.reg.Close()
	}
	if a.home != nil {
		_ = a.home.Close()
	}
	if a.store != nil {
		_ = a.store.Close()
	}
}
