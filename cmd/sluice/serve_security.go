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

	storeTLS                            bool
	storeTLSCAFile, storeTLSCertFile    string
	storeTLSKeyFile, storeTLSServerName string
	storeUser, storePass, storePassFile string
	listenTLS, storeTLSConfig           *tls.Config // built by resolveSecurity
}

// registerSecurity adds the security flags to fs.
func (s *securityFlags) registerSecurity(fs *flag.FlagSet) {
	fs.StringVar(&s.adminPass, "admin-pass", "", "password of the admin user, needed for RL.RESET and RL.POLICY SET|DEL: AUTH admin <password> (prefer --admin-pass-file or SLUICE_ADMIN_PASS)")
	fs.StringVar(&s.adminPassFile, "admin-pass-file", "", "file holding the admin password")
	fs.StringVar(&s.tlsCertFile, "tls-cert-file", "", "PEM certificate (chain) for --listen; with --tls-key-file, --listen speaks TLS only")
	fs.StringVar(&s.tlsKeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&s.tlsCAFile, "tls-ca-cert-file", "", "PEM CA certificates that client certificates are verified against")
	fs.BoolVar(&s.tlsAuthClients, "tls-auth-clients", false, "require a client certificate signed by --tls-ca-cert-file (mutual TLS)")
	fs.BoolVar(&s.storeTLS, "store-tls", false, "connect to Redis with TLS (implied by rediss:// and by the other --store-tls-* flags)")
	fs.StringVar(&s.storeTLSCAFile, "store-tls-ca-file", "", "PEM CA certificates that Redis's certificate is verified against (default: the system's)")
	fs.StringVar(&s.storeTLSCertFile, "store-tls-cert-file", "", "PEM client certificate for Redis (tls-auth-clients yes)")
	fs.StringVar(&s.storeTLSKeyFile, "store-tls-key-file", "", "PEM private key of --store-tls-cert-file")
	fs.StringVar(&s.storeTLSServerName, "store-tls-server-name", "", "name Redis's certificate must have (default: the host dialed)")
	fs.StringVar(&s.storeUser, "store-user", "", "Redis ACL user (or SLUICE_STORE_USER); default: the URL's, else none")
	fs.StringVar(&s.storePassFile, "store-pass-file", "", "file holding the Redis password (or SLUICE_STORE_PASS); overrides the URL's")
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
	if s.storePass, err = secretFrom("store-pass", "", s.storePassFile, "SLUICE_STORE_PASS"); err != nil {
		return err
	}
	if s.storeUser == "" {
		s.storeUser = os.Getenv("SLUICE_STORE_USER")
	}
	if s.listenTLS, err = s.listenerTLS(); err != nil {
		return err
	}
	s.storeTLSConfig, err = s.storeTLSFor(f.redisURL)
	return err
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

// storeTLSFor is the TLS configuration for Redis, or nil for plain TCP (or
// go-redis's defaults for a rediss:// URL without --store-tls-* flags).
func (s *securityFlags) storeTLSFor(redisURL string) (*tls.Config, error) {
	files := s.storeTLSCAFile != "" || s.storeTLSCertFile != "" || s.storeTLSKeyFile != "" || s.storeTLSServerName != ""
	rediss := strings.HasPrefix(strings.ToLower(redisURL), "rediss://")
	if !s.storeTLS && !files && !rediss {
		return nil, nil
	}
	if (s.storeTLSCertFile == "") != (s.storeTLSKeyFile == "") {
		return nil, errors.New("serve: --store-tls-cert-file and --store-tls-key-file go together")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.storeTLSServerName}
	var err error
	if s.storeTLSCAFile != "" {
		if cfg.RootCAs, err = loadPool("store-tls-ca-file", s.storeTLSCAFile); err != nil {
			return nil, err
		}
	}
	if s.storeTLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.storeTLSCertFile, s.storeTLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("serve: --store-tls-cert-file/--store-tls-key-file: %w", err)
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

// newStore is cluster.New with the store's TLS and credentials; its error
// never shows the password of a redis://user:pass@ URL.
//
// Each store call carries its own deadline, the timeout in force, which a
// reload may raise up to policy.MaxTimeout (or --timeout pins): the
// connections get the largest such deadline as their bound (MaxTimeout),
// so that they never cut a raised timeout short, as the timeout at start
// would.
func (f *serveFlags) newStore(cfg cluster.Config) (*cluster.Store, error) {
	cfg.MaxTimeout = max(f.timeout, policy.MaxTimeout)
	cfg.TLS = f.storeTLSConfig
	cfg.Username, cfg.Password = f.storeUser, f.storePass
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
