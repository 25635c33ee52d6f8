package app

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-rl/sluice/httpfront"
	"github.com/sluice-rl/sluice/internal/acl"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/region"
)

// Config is everything `sluice serve` runs with: one field per serve flag,
// filled by Load from the table (rows) by the one precedence rule
// (resolve). A Config made by hand starts from Defaults; New checks it
// and derives the rest.
type Config struct {
	Listen, Admin, HTTP, HTTPKeyHeader string
	GRPC                               string // Envoy's rate-limit service; "" = off
	GRPCHeaders                        bool
	Pprof                              string // Go's /debug/pprof; "" = off

	Cluster, Redis, Sentinel   string // the store: one of them, or none (embedded)
	SentinelUser, SentinelPass string
	Store                      RedisAuth // --store-*: the store's (and Sentinel's primary's)
	PolicyFile, EnvoyConfig    string    // --config and --envoy-config
	WatchConfig                bool      // --watch-config: reload them, and --aclfile, when they change on disk

	// Timeout is --timeout when given; zero: the policy file's timeout:,
	// else limit.DefaultTimeout (see TimeoutIn).
	Timeout                                                              time.Duration
	LeaseTTL, IdleTimeout, RequestTimeout, WriteTimeout, ShutdownTimeout time.Duration
	MaxClients, MaxRequestBytes, MaxKeyBytes, MaxOutputBytes             int
	StorePipelines                                                       int
	StorePerKey                                                          bool

	RequirePass, AdminPass             string
	ACLFile                            string // --aclfile: users and permissions; exclusive with the two above
	TLSCertFile, TLSKeyFile, TLSCAFile string // --listen's TLS
	TLSAuthClients                     bool

	Region, HomeCluster, HomeRedis string
	HomeTimeout, RegionTick        time.Duration
	Home                           RedisAuth // --home-*

	LogFormat, LogLevel string

	// OTLPEndpoint is where traces go (OTLP over HTTP); "" is tracing off,
	// the default. TraceSampleRatio is the share of root spans sampled
	// (tracing.go).
	OTLPEndpoint     string
	TraceSampleRatio float64

	Version string       // not a flag: the binary's version, for INFO and /metrics
	Logger  *slog.Logger // not a flag: nil is slog.Default()

	listenTLS     *tls.Config // derived from the TLS files
	masterName    string      // derived from Sentinel
	sentinelAddrs []string    // derived from Sentinel

	tracer trace.Tracer // derived: nil when tracing is off (tracing.go)
}

// Defaults is the Config of `sluice serve` without flags or environment:
// every field at the table's default.
func Defaults() Config {
	var c Config
	c.register(flag.NewFlagSet("serve", flag.ContinueOnError), map[string]*string{})
	c.Timeout = 0 // steps 4 and 5 of the rule are TimeoutIn's
	return c
}

// RedisAuth is how sluice reaches and authenticates to one Redis store:
// its TLS and ACL user and password. The regional store has one
// (--store-*, SLUICE_STORE_*), the home store of --region another
// (--home-*, SLUICE_HOME_*); no flag of one applies to the other.
type RedisAuth struct {
	TLS                       bool
	TLSCAFile, TLSCertFile    string
	TLSKeyFile, TLSServerName string
	User, Pass                string
	tlsConfig                 *tls.Config // derived
}

// row is one line of the table of serve flags: the flag, the Config field
// it fills (ptr, a *string, *bool, *int or *time.Duration) and its default,
// and the other sources of the same value, tried by the one rule
// (resolve): file, the flag naming a file that holds the value; env, an
// environment variable; yaml, a field of the --config file. A row whose
// value has only a file form has no flag.
type row struct {
	flag, help     string
	file, fileHelp string
	env, yaml      string
	ptr, def       any
}

// rows is the table: every serve flag, in the order the docs list them.
func (c *Config) rows() []row {
	rs := []row{
		{flag: "listen", ptr: &c.Listen, def: "127.0.0.1:6380", help: "RESP listen address"},
		{flag: "admin", ptr: &c.Admin, def: "127.0.0.1:9380", help: "HTTP address for /metrics, /healthz and /readyz (\"\" = off)"},
		{flag: "pprof", ptr: &c.Pprof, def: "", help: "HTTP address of Go's /debug/pprof profiling endpoints, e.g. 127.0.0.1:6060 (\"\" = off, the default; keep it on loopback)"},
		{flag: "cluster", ptr: &c.Cluster, def: "", help: "Redis Cluster seed nodes, host:port[,host:port…]"},
		{flag: "redis", ptr: &c.Redis, def: "", help: "a single Redis node, redis://[user:pass@]host:port"},
		{flag: "sentinel", ptr: &c.Sentinel, def: "", help: "a primary watched by Redis Sentinel: NAME@host:port[,host:port…] (the master name and the sentinels)"},
		{flag: "sentinel-user", env: "SLUICE_SENTINEL_USER", ptr: &c.SentinelUser, def: "", help: "ACL user of the sentinels (or SLUICE_SENTINEL_USER); default none"},
		{file: "sentinel-pass-file", env: "SLUICE_SENTINEL_PASS", ptr: &c.SentinelPass, fileHelp: "file holding the sentinels' password (or SLUICE_SENTINEL_PASS), when they have requirepass"},
		{flag: "config", env: "SLUICE_CONFIG", ptr: &c.PolicyFile, def: "", help: "policy file (YAML), or SLUICE_CONFIG; none = one built-in catch-all policy"},
		{flag: "envoy-config", ptr: &c.EnvoyConfig, def: "", help: "directory of envoyproxy/ratelimit config files (*.yaml), reloaded on SIGHUP"},
		{flag: "watch-config", ptr: &c.WatchConfig, def: true, help: "reload --config, --aclfile and --envoy-config when their content changes on disk (a ConfigMap or Secret update, an editor's save), as SIGHUP does; false: SIGHUP only"},
		{flag: "timeout", yaml: "timeout", ptr: &c.Timeout, def: limit.DefaultTimeout, help: "deadline of every store call (overrides the config's timeout)"},
		{flag: "grpc", ptr: &c.GRPC, def: "", help: "address of Envoy's rate-limit service (v3, gRPC), e.g. 127.0.0.1:8081 (\"\" = off)"},
		{flag: "grpc-ratelimit-headers", ptr: &c.GRPCHeaders, def: false, help: "--grpc replies carry RateLimit-Policy and RateLimit response headers for Envoy to add"},
		{flag: "http", ptr: &c.HTTP, def: "", help: "HTTP address of the JSON and 429 door, /v1/take and /v1/check (\"\" = off)"},
		{flag: "http-key-header", ptr: &c.HTTPKeyHeader, def: httpfront.DefaultKeyHeader, help: "request header /v1/check takes the key from when the query has none (forward-auth)"},
		{flag: "requirepass", env: "SLUICE_REQUIREPASS", file: "requirepass-file", ptr: &c.RequirePass, def: "",
			help: "password clients must AUTH with (prefer --requirepass-file or SLUICE_REQUIREPASS)", fileHelp: "file holding the password"},
		{flag: "admin-pass", env: "SLUICE_ADMIN_PASS", file: "admin-pass-file", ptr: &c.AdminPass, def: "",
			help: "password of the admin user, needed for RL.RESET and RL.POLICY SET|DEL: AUTH admin <password> (prefer --admin-pass-file or SLUICE_ADMIN_PASS)", fileHelp: "file holding the admin password"},
		{flag: "aclfile", ptr: &c.ACLFile, def: "",
			help: "users and their permissions in Redis's ACL file syntax (user acme on >pw ~acme:* +@limit), reloaded on SIGHUP and ACL LOAD; exclusive with --requirepass and --admin-pass"},
		{flag: "tls-cert-file", ptr: &c.TLSCertFile, def: "", help: "PEM certificate (chain) for --listen; with --tls-key-file, --listen speaks TLS only"},
		{flag: "tls-key-file", ptr: &c.TLSKeyFile, def: "", help: "PEM private key of --tls-cert-file"},
		{flag: "tls-ca-cert-file", ptr: &c.TLSCAFile, def: "", help: "PEM CA certificates that client certificates are verified against"},
		{flag: "tls-auth-clients", ptr: &c.TLSAuthClients, def: false, help: "require a client certificate signed by --tls-ca-cert-file (mutual TLS)"},
	}
	rs = append(rs, c.Store.rows("store", "Redis", "--redis")...)
	rs = append(rs, []row{
		{flag: "max-clients", ptr: &c.MaxClients, def: 10000, help: "connections beyond this get -ERR max number of clients reached"},
		{flag: "max-request-bytes", ptr: &c.MaxRequestBytes, def: 64 << 10, help: "a request larger than this closes its connection"},
		{flag: "max-key-bytes", ptr: &c.MaxKeyBytes, def: 1024, help: "longest key accepted"},
		{flag: "max-output-bytes", ptr: &c.MaxOutputBytes, def: 1 << 20, help: "replies a connection buffers before writing them out, mid-pipeline if need be"},
		{flag: "store-pipelines", ptr: &c.StorePipelines, def: 2, help: "pipelines in flight per Redis node; requests arriving meanwhile are batched into the next"},
		{flag: "store-per-key", ptr: &c.StorePerKey, def: false, help: "send every decision by its own script call, not one batch script call per node pipeline (for comparison)"},
		{flag: "lease-ttl", ptr: &c.LeaseTTL, def: 100 * time.Millisecond, help: "how long leased tokens of a hot key may stay unused before they go back"},
		{flag: "idle-timeout", ptr: &c.IdleTimeout, def: time.Duration(0), help: "close connections idle this long (0 = never)"},
		{flag: "request-timeout", ptr: &c.RequestTimeout, def: 10 * time.Second, help: "close a connection whose request is not complete this long after its first byte"},
		{flag: "write-timeout", ptr: &c.WriteTimeout, def: 10 * time.Second, help: "close a connection that does not take its replies within this long"},
		{flag: "shutdown-timeout", ptr: &c.ShutdownTimeout, def: 5 * time.Second, help: "how long in-flight requests may take to finish on SIGTERM"},
		{flag: "region", ptr: &c.Region, def: "", help: "this instance's region; with a home store, scope: global policies are decided from the region's allocation"},
		{flag: "home-cluster", ptr: &c.HomeCluster, def: "", help: "the home store of global budgets, a Redis Cluster: host:port[,host:port…]"},
		{flag: "home-redis", ptr: &c.HomeRedis, def: "", help: "the home store of global budgets, a single Redis: redis://[user:pass@]host:port"},
		{flag: "home-timeout", ptr: &c.HomeTimeout, def: region.DefaultHomeTimeout, help: "deadline of each call to the home store; silent this long, the region decides alone (region_floor)"},
		{flag: "region-tick", ptr: &c.RegionTick, def: region.DefaultTick, help: "how often the region allocator claims from home and reports demand"},
	}...)
	rs = append(rs, c.Home.rows("home", "the home store", "--home-redis")...)
	return append(rs,
		row{flag: "log-format", ptr: &c.LogFormat, def: "text", help: "text or json"},
		row{flag: "log-level", ptr: &c.LogLevel, def: "info", help: "debug, info, warn or error"},
		row{flag: "otlp-endpoint", env: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ptr: &c.OTLPEndpoint, def: "",
			help: "send OpenTelemetry traces by OTLP/HTTP to this URL, e.g. http://127.0.0.1:4318 (/v1/traces is added to a URL without a path); also OTEL_EXPORTER_OTLP_ENDPOINT; \"\" = off, the default (docs/tracing.md)"},
		row{flag: "trace-sample-ratio", ptr: &c.TraceSampleRatio, def: 1.0, help: "share of traces started here that are sampled, 0 to 1; a door's traceparent keeps its caller's choice"})
}

// rows are the flags --prefix-tls, --prefix-tls-ca-file,
// --prefix-tls-cert-file, --prefix-tls-key-file, --prefix-tls-server-name,
// --prefix-user and --prefix-pass-file of one store; who names the store
// in their help ("Redis"), url the URL flag whose credentials they
// override.
func (a *RedisAuth) rows(prefix, who, url string) []row {
	env := "SLUICE_" + strings.ToUpper(prefix)
	return []row{
		{flag: prefix + "-tls", ptr: &a.TLS, def: false, help: fmt.Sprintf("connect to %s with TLS (implied by a rediss:// %s and by the other --%s-tls-* flags)", who, url, prefix)},
		{flag: prefix + "-tls-ca-file", ptr: &a.TLSCAFile, def: "", help: fmt.Sprintf("PEM CA certificates that the certificate of %s is verified against (default: the system's)", who)},
		{flag: prefix + "-tls-cert-file", ptr: &a.TLSCertFile, def: "", help: fmt.Sprintf("PEM client certificate for %s (tls-auth-clients yes)", who)},
		{flag: prefix + "-tls-key-file", ptr: &a.TLSKeyFile, def: "", help: fmt.Sprintf("PEM private key of --%s-tls-cert-file", prefix)},
		{flag: prefix + "-tls-server-name", ptr: &a.TLSServerName, def: "", help: fmt.Sprintf("name the certificate of %s must have (default: the host dialed)", who)},
		{flag: prefix + "-user", env: env + "_USER", ptr: &a.User, def: "", help: fmt.Sprintf("ACL user of %s (or %s_USER); default: the %s URL's, else none", who, env, url)},
		{file: prefix + "-pass-file", env: env + "_PASS", ptr: &a.Pass, fileHelp: fmt.Sprintf("file holding the password of %s (or %s_PASS); overrides the %s URL's", who, env, url)},
	}
}

// register adds every flag of the table to fs, each bound to its field of
// c; the file forms are bound to files, by flag name.
func (c *Config) register(fs *flag.FlagSet, files map[string]*string) {
	for _, r := range c.rows() {
		if r.file != "" {
			files[r.file] = fs.String(r.file, "", r.fileHelp)
		}
		if r.flag == "" {
			continue
		}
		switch p := r.ptr.(type) {
		case *string:
			fs.StringVar(p, r.flag, r.def.(string), r.help)
		case *bool:
			fs.BoolVar(p, r.flag, r.def.(bool), r.help)
		case *int:
			fs.IntVar(p, r.flag, r.def.(int), r.help)
		case *time.Duration:
			fs.DurationVar(p, r.flag, r.def.(time.Duration), r.help)
		case *float64:
			fs.Float64Var(p, r.flag, r.def.(float64), r.help)
		default:
			panic(fmt.Sprintf("app: flag --%s: a %T field", r.flag, r.ptr))
		}
	}
}

// FlagSet is the flag set of `sluice serve`, bound to a fresh Config; it
// is what -h prints.
func FlagSet(stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	(&Config{}).register(fs, map[string]*string{})
	return fs
}

// Load is the Config of the serve arguments args, by the table: the flags,
// then the other sources of each value by the one rule (resolve); getenv
// is how the environment is read (os.Getenv in the binary). It refuses
// flags that contradict each other, and loads the TLS files, so that a bad
// file stops sluice at start.
//
// The rule is not peterbourgon/ff's (flags, then environment, then a file
// of flag values): that would give all 54 flags an environment variable
// and read --config as flag values, while here only secrets and users
// have variables, a secret's file form outranks its flag, and --config is
// the policy file, re-read on every reload.
func Load(args []string, getenv func(string) string, stderr io.Writer) (*Config, error) {
	c := &Config{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	files := map[string]*string{}
	c.register(fs, files)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if err := c.check(files); err != nil {
		return nil, err
	}
	if err := c.resolve(given, files, getenv); err != nil {
		return nil, err
	}
	c.resolveOTLP(given["otlp-endpoint"], getenv)
	if err := c.checkUsers(); err != nil {
		return nil, err
	}
	return c, c.derive()
}

// checkUsers refuses --aclfile beside --requirepass or --admin-pass (in any
// of their forms: flag, file or environment), as Redis refuses aclfile
// beside requirepass: one place defines the users, so which password wins
// is never a guess. Write the default and admin users into the file.
func (c *Config) checkUsers() error {
	if c.ACLFile == "" || (c.RequirePass == "" && c.AdminPass == "") {
		return nil
	}
	var names []string
	if c.RequirePass != "" {
		names = append(names, "--requirepass (or --requirepass-file, SLUICE_REQUIREPASS)")
	}
	if c.AdminPass != "" {
		names = append(names, "--admin-pass (or --admin-pass-file, SLUICE_ADMIN_PASS)")
	}
	return fmt.Errorf("serve: --aclfile and %s are exclusive: give the default and admin users their passwords in the ACL file", strings.Join(names, " and "))
}

// LoadUsers is the users sluice runs with: the --aclfile's (its error
// names file:line and the rule, never a password), else those of
// --requirepass and --admin-pass (acl.FromFlags).
func (c *Config) LoadUsers() (*acl.List, error) {
	if c.ACLFile == "" {
		return acl.FromFlags(c.RequirePass, c.AdminPass), nil
	}
	return LoadACLFile(c.ACLFile)
}

// LoadACLFile reads and parses an ACL file.
func LoadACLFile(path string) (*acl.List, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--aclfile: %w", err)
	}
	return acl.Parse(path, data)
}

// resolve applies the one precedence rule to every row with more than one
// source. A value comes from the first of these that has one:
//
//  1. its file form (--requirepass-file FILE): the file's text without
//     trailing newlines; an empty or unreadable file is an error;
//  2. its flag, given on the command line with a non-empty value;
//  3. its environment variable, when set and not empty;
//  4. its field in the --config file (timeout:), when above zero: that
//     file is read at start and on every reload, so this step and the next
//     are taken where it is read (TimeoutIn);
//  5. its default.
func (c *Config) resolve(given map[string]bool, files map[string]*string, getenv func(string) string) error {
	for _, r := range c.rows() {
		switch p := r.ptr.(type) {
		case *string:
			if r.file == "" && r.env == "" {
				continue
			}
			var file, flagV, env string
			if f := files[r.file]; f != nil && *f != "" {
				var err error
				if file, err = readSecret(r.file, *f); err != nil {
					return err
				}
			}
			if given[r.flag] {
				flagV = *p
			}
			if r.env != "" {
				env = getenv(r.env)
			}
			*p = first(file, flagV, env)
		case *time.Duration:
			if r.yaml != "" && !given[r.flag] {
				*p = 0 // steps 4 and 5 are TimeoutIn's
			}
		}
	}
	return nil
}

// first is the one rule's pick: the first of vs that is not zero, else
// zero.
func first[T comparable](vs ...T) T {
	var zero T
	for _, v := range vs {
		if v != zero {
			return v
		}
	}
	return zero
}

// TimeoutIn is the deadline of every store call while set is the policy
// file in force: by the rule, --timeout, else set's timeout:, else
// limit.DefaultTimeout. It is the one timeout the server supplies to every
// package that calls the store.
func (c *Config) TimeoutIn(set *policy.Set) time.Duration {
	return first(c.Timeout, max(set.Timeout, 0), limit.DefaultTimeout)
}

// readSecret is the text of the file of --name, without its trailing
// newlines; an empty file is an error rather than no password.
func readSecret(name, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("serve: --%s: %w", name, err)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("serve: --%s %s is empty", name, path)
	}
	return v, nil
}

// check refuses flags that contradict each other or need another, before
// the environment fills anything in: an environment variable for a store
// that is not used is no error.
func (c *Config) check(files map[string]*string) error {
	fileGiven := func(name string) bool { return *files[name] != "" }
	home := c.HomeCluster != "" || c.HomeRedis != ""
	switch {
	case c.Cluster != "" && c.Redis != "":
		return errors.New("serve: --cluster and --redis are exclusive")
	case c.Sentinel == "" && (c.SentinelUser != "" || fileGiven("sentinel-pass-file")):
		return errors.New("serve: --sentinel-user and --sentinel-pass-file need --sentinel")
	case c.Sentinel != "" && (c.Cluster != "" || c.Redis != ""):
		return errors.New("serve: --sentinel, --cluster and --redis are exclusive: give one store")
	}
	if err := c.parseSentinel(); err != nil {
		return err
	}
	switch {
	case c.HomeCluster != "" && c.HomeRedis != "":
		return errors.New("serve: --home-cluster and --home-redis are exclusive")
	case c.Region != "" && !home:
		return errors.New("serve: --region needs a home store: --home-cluster or --home-redis")
	case c.Region == "" && home:
		return errors.New("serve: --home-cluster and --home-redis need --region NAME")
	case !home && (c.Home.given() || fileGiven("home-pass-file")):
		return errors.New("serve: --home-tls*, --home-user and --home-pass-file need a home store: --home-cluster or --home-redis")
	case c.HomeTimeout <= 0 || c.RegionTick <= 0:
		return errors.New("serve: --home-timeout and --region-tick must be positive")
	case c.Timeout <= 0:
		return errors.New("serve: --timeout must be positive")
	}
	return nil
}

// NewLogger is the logger of --log-format and --log-level, writing to w.
func (c *Config) NewLogger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return nil, fmt.Errorf("serve: --log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.LogFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("serve: --log-format %q: want text or json", c.LogFormat)
}
