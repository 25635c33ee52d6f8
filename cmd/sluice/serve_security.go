package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/policy"
)

// securityFlags are the serve flags for passwords and TLS. Secrets come
// from a flag, a file or the environment, and are never printed: flag
// defaults are empty, and errors that could quote a Redis URL are redacted.
type securityFlags struct {
	adminPass, adminPassFile string

	tlsCertFile, tlsKeyFile, tlsCAFile string
	tlsAuthClients                     bool
	listenTLS                          *tls.Config // built by resolveSecurity

	store redisAuth // --store-*: the regional store (and Sentinel's primary)
}

// redisAuth is how sluice reaches and authenticates to one Redis store:
// its TLS and ACL user and password. The regional store has one
// (--store-*, SLUICE_STORE_*), the home store of --region another
// (--home-*, SLUICE_HOME_*); no flag of one applies to the other.
type redisAuth struct {
	tls                       bool
	tlsCAFile, tlsCertFile    string
	tlsKeyFile, tlsServerName string
	user, passFile            string
	pass                      string      // resolved: the file's, else the environment's
	tlsConfig                 *tls.Config // resolved
}

// register adds --prefix-tls, --prefix-tls-ca-file, --prefix-tls-cert-file,
// --prefix-tls-key-file, --prefix-tls-server-name, --prefix-user and
// --prefix-pass-file to fs; who names the store in their help ("Redis"),
// url the URL flag whose credentials they override.
func (a *redisAuth) register(fs *flag.FlagSet, prefix, who, url string) {
	env := envPrefix(prefix)
	fs.BoolVar(&a.tls, prefix+"-tls", false, fmt.Sprintf("connect to %s with TLS (implied by a rediss:// %s and by the other --%s-tls-* flags)", who, url, prefix))
	fs.StringVar(&a.tlsCAFile, prefix+"-tls-ca-file", "", fmt.Sprintf("PEM CA certificates that the certificate of %s is verified against (default: the system's)", who))
	fs.StringVar(&a.tlsCertFile, prefix+"-tls-cert-file", "", fmt.Sprintf("PEM client certificate for %s (tls-auth-clients yes)", who))
	fs.StringVar(&a.tlsKeyFile, prefix+"-tls-key-file", "", fmt.Sprintf("PEM private key of --%s-tls-cert-file", prefix))
	fs.StringVar(&a.tlsServerName, prefix+"-tls-server-name", "", fmt.Sprintf("name the certificate of %s must have (default: the host dialed)", who))
	fs.StringVar(&a.user, prefix+"-user", "", fmt.Sprintf("ACL user of %s (or %s_USER); default: the %s URL's, else none", who, env, url))
	fs.StringVar(&a.passFile, prefix+"-pass-file", "", fmt.Sprintf("file holding the password of %s (or %s_PASS); overrides the %s URL's", who, env, url))
}

// envPrefix is the environment variables' prefix of the flags --prefix-*:
// SLUICE_STORE for "store".
func envPrefix(prefix string) string { return "SLUICE_" + strings.ToUpper(prefix) }

// resolve reads the password (--prefix-pass-file, else SLUICE_PREFIX_PASS),
// the user (--prefix-user, else SLUICE_PREFIX_USER) and loads the TLS files,
// so that a bad file stops sluice at start; rawURL is the store's URL, if
// it has one (rediss:// implies TLS).
func (a *redisAuth) resolve(prefix, rawURL string) error {
	var err error
	if a.pass, err = secretFrom(prefix+"-pass", "", a.passFile, envPrefix(prefix)+"_PASS"); err != nil {
		return err
	}
	if a.user == "" {
		a.user = os.Getenv(envPrefix(prefix) + "_USER")
	}
	a.tlsConfig, err = a.tlsFor(prefix, rawURL)
	return err
}

// set gives cfg this store's TLS and credentials, which override a URL's.
func (a *redisAuth) set(cfg *cluster.Config) {
	cfg.TLS = a.tlsConfig
	cfg.Username, cfg.Password = a.user, a.pass
}

// registerSecurity adds the security flags to fs.
func (s *securityFlags) registerSecurity(fs *flag.FlagSet) {
	fs.StringVar(&s.adminPass, "admin-pass", "", "password of the admin user, needed for RL.RESET and RL.POLICY SET|DEL: AUTH admin <password> (prefer --admin-pass-file or SLUICE_ADMIN_PASS)")
	fs.StringVar(&s.adminPassFile, "admin-pass-file", "", "file holding the admin password")
	fs.StringVar(&s.tlsCertFile, "tls-cert-file", "", "PEM certificate (chain) for --listen; with --tls-key-file, --listen speaks TLS only")
	fs.StringVar(&s.tlsKeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&s.tlsCAFile, "tls-ca-cert-file", "", "PEM CA certificates that client certificates are verified against")
	fs.BoolVar(&s.tlsAuthClients, "tls-auth-clients", false, "require a client certificate signed by --tls-ca-cert-file (mutual TLS)")
	s.store.register(fs, "store", "Redis", "--redis")
}

// resolveSecurity reads the secrets from files and the environment and
// loads the certificates, so that a bad file stops sluice at start.
func (f *serveFlags) resolveSecurity() error {
	s := &f.securityFlags
	if f.requirePassFile != "" && f.requirePass == "" {
		return errors.New("serve: --requirepass-file is empty")
	}
	var err error
	if s.adminPass, err = secretFrom("admin-pass", s.adminPass, s.adminPassFile, "SLUICE_ADMIN_PASS"); err != nil {
		return err
	}
	if s.listenTLS, err = s.listenerTLS(); err != nil {
		return err
	}
	if err := s.store.resolve("store", f.redisURL); err != nil {
		return err
	}
	if f.homeCluster == "" && f.homeRedis == "" {
		return nil
	}
	return f.home.resolve("home", f.homeRedis)
}

// secretFrom returns the secret of --name (value), else of --name-file,
// else of the environment variable env. A file's trailing newlines are
// dropped, and an empty file is an error rather than no password.
func secretFrom(name, value, file, env string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("serve: --%s-file: %w", name, err)
		}
		v := strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", fmt.Errorf("serve: --%s-file %s is empty", name, file)
		}
		return v, nil
	}
	if value != "" {
		return value, nil
	}
	return os.Getenv(env), nil
}

// listenerTLS is the TLS configuration of --listen, or nil for plain TCP.
func (s *securityFlags) listenerTLS() (*tls.Config, error) {
	switch {
	case s.tlsCertFile == "" && s.tlsKeyFile == "":
		if s.tlsCAFile != "" || s.tlsAuthClients {
			return nil, errors.New("serve: --tls-ca-cert-file and --tls-auth-clients need --tls-cert-file and --tls-key-file")
		}
		return nil, nil
	case s.tlsCertFile == "" || s.tlsKeyFile == "":
		return nil, errors.New("serve: --tls-cert-file and --tls-key-file go together")
	case s.tlsAuthClients && s.tlsCAFile == "":
		return nil, errors.New("serve: --tls-auth-clients needs --tls-ca-cert-file")
	}
	cert, err := tls.LoadX509KeyPair(s.tlsCertFile, s.tlsKeyFile)
	if err != nil {
		return nil, fmt.Errorf("serve: --tls-cert-file/--tls-key-file: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if s.tlsCAFile != "" {
		if cfg.ClientCAs, err = loadPool("tls-ca-cert-file", s.tlsCAFile); err != nil {
			return nil, err
		}
		// A client certificate, when given, must verify; with
		// --tls-auth-clients one is required.
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		if s.tlsAuthClients {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return cfg, nil
}

// given reports whether any flag of this store was set.
func (a *redisAuth) given() bool {
	return a.tls || a.tlsFilesGiven() || a.user != "" || a.passFile != ""
}

func (a *redisAuth) tlsFilesGiven() bool {
	return a.tlsCAFile != "" || a.tlsCertFile != "" || a.tlsKeyFile != "" || a.tlsServerName != ""
}

// tlsFor is the TLS configuration of the store of --prefix-tls*, or nil for
// plain TCP (or go-redis's defaults for a rediss:// URL without
// --prefix-tls-* flags).
func (a *redisAuth) tlsFor(prefix, rawURL string) (*tls.Config, error) {
	rediss := strings.HasPrefix(strings.ToLower(rawURL), "rediss://")
	if !a.tls && !a.tlsFilesGiven() && !rediss {
		return nil, nil
	}
	if (a.tlsCertFile == "") != (a.tlsKeyFile == "") {
		return nil, fmt.Errorf("serve: --%s-tls-cert-file and --%[1]s-tls-key-file go together", prefix)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: a.tlsServerName}
	var err error
	if a.tlsCAFile != "" {
		if cfg.RootCAs, err = loadPool(prefix+"-tls-ca-file", a.tlsCAFile); err != nil {
			return nil, err
		}
	}
	if a.tlsCertFile != "" {
		cert, err := tls.LoadX509KeyPair(a.tlsCertFile, a.tlsKeyFile)
		if err != nil {
			return nil, fmt.Errorf("serve: --%s-tls-cert-file/--%[1]s-tls-key-file: %w", prefix, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func loadPool(flagName, path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("serve: --%s: %w", flagName, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("serve: --%s %s: no PEM certificate in it", flagName, path)
	}
	return pool, nil
}

// newStore is cluster.New with the TLS and credentials of auth (the
// regional store's or home's); its error never shows the password of a
// redis://user:pass@ URL.
//
// Each store call carries its own deadline, the timeout in force, which a
// reload may raise up to policy.MaxTimeout (or --timeout pins): the
// connections get the largest such deadline as their bound (MaxTimeout),
// so that they never cut a raised timeout short, as the timeout at start
// would.
func (f *serveFlags) newStore(cfg cluster.Config, auth *redisAuth) (*cluster.Store, error) {
	cfg.MaxTimeout = max(f.timeout, policy.MaxTimeout)
	auth.set(&cfg)
	s, err := cluster.New(cfg)
	if err != nil {
		return nil, redactErr(err, cfg.URL)
	}
	return s, nil
}

// redactedErr is an error whose text had a password taken out.
type redactedErr struct {
	msg string
	err error
}

func (e *redactedErr) Error() string { return e.msg }
func (e *redactedErr) Unwrap() error { return e.err }

// redactErr replaces, in err's text, rawURL's password and any URL password
// it quotes with "xxxxx".
func redactErr(err error, rawURL string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if pw := urlPassword(rawURL); pw != "" {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	msg = redactURLs(msg)
	if msg == err.Error() {
		return err
	}
	return &redactedErr{msg: msg, err: err}
}

// redactURL is rawURL with its password, if any, replaced by "xxxxx", for
// a log line: redis://user:xxxxx@host:port. "" stays "".
func redactURL(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		return u.Redacted()
	}
	return redactURLs(rawURL)
}

// urlPassword returns the password of scheme://user:pass@host…, even when
// the URL does not parse.
func urlPassword(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		pw, _ := u.User.Password()
		return pw
	}
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return ""
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return ""
	}
	_, pw, _ := strings.Cut(rest[:at], ":")
	return pw
}

// redactURLs replaces the password of every scheme://user:pass@ in s.
func redactURLs(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+3])
		s = s[i+3:]
		end := strings.IndexAny(s, "/ \t\"'")
		if end < 0 {
			end = len(s)
		}
		at := strings.LastIndexByte(s[:end], '@')
		if user, _, ok := strings.Cut(s[:max(at, 0)], ":"); at >= 0 && ok {
			b.WriteString(user + ":xxxxx")
			s = s[at:]
		}
	}
}
