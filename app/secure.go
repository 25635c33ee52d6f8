package app

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/policy"
)

// derive parses --sentinel and loads the TLS files of --listen, of the
// regional store and (with --region) of home, so that a bad file stops
// sluice at start. Secrets are never printed: errors that could quote a
// Redis URL are redacted.
func (c *Config) derive() error {
	if err := c.parseSentinel(); err != nil {
		return err
	}
	var err error
	if c.listenTLS, err = c.listenerTLS(); err != nil {
		return err
	}
	if c.Store.tlsConfig, err = c.Store.tlsFor("store", c.Redis); err != nil {
		return err
	}
	if c.HomeCluster == "" && c.HomeRedis == "" {
		return nil
	}
	c.Home.tlsConfig, err = c.Home.tlsFor("home", c.HomeRedis)
	return err
}

// set gives cfg this store's TLS and credentials, which override a URL's.
func (a *RedisAuth) set(cfg *cluster.Config) {
	cfg.TLS = a.tlsConfig
	cfg.Username, cfg.Password = a.User, a.Pass
}

// listenerTLS is the TLS configuration of --listen, or nil for plain TCP.
func (c *Config) listenerTLS() (*tls.Config, error) {
	switch {
	case c.TLSCertFile == "" && c.TLSKeyFile == "":
		if c.TLSCAFile != "" || c.TLSAuthClients {
			return nil, errors.New("serve: --tls-ca-cert-file and --tls-auth-clients need --tls-cert-file and --tls-key-file")
		}
		return nil, nil
	case c.TLSCertFile == "" || c.TLSKeyFile == "":
		return nil, errors.New("serve: --tls-cert-file and --tls-key-file go together")
	case c.TLSAuthClients && c.TLSCAFile == "":
		return nil, errors.New("serve: --tls-auth-clients needs --tls-ca-cert-file")
	}
	cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("serve: --tls-cert-file/--tls-key-file: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if c.TLSCAFile != "" {
		if cfg.ClientCAs, err = loadPool("tls-ca-cert-file", c.TLSCAFile); err != nil {
			return nil, err
		}
		// A client certificate, when given, must verify; with
		// --tls-auth-clients one is required.
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		if c.TLSAuthClients {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return cfg, nil
}

// given reports whether any flag of this store but its password file was
// set.
func (a *RedisAuth) given() bool {
	return a.TLS || a.tlsFilesGiven() || a.User != ""
}

func (a *RedisAuth) tlsFilesGiven() bool {
	return a.TLSCAFile != "" || a.TLSCertFile != "" || a.TLSKeyFile != "" || a.TLSServerName != ""
}

// tlsFor is the TLS configuration of the store of --prefix-tls*, or nil for
// plain TCP (or go-redis's defaults for a rediss:// URL without
// --prefix-tls-* flags).
func (a *RedisAuth) tlsFor(prefix, rawURL string) (*tls.Config, error) {
	rediss := strings.HasPrefix(strings.ToLower(rawURL), "rediss://")
	if !a.TLS && !a.tlsFilesGiven() && !rediss {
		return nil, nil
	}
	if (a.TLSCertFile == "") != (a.TLSKeyFile == "") {
		return nil, fmt.Errorf("serve: --%s-tls-cert-file and --%[1]s-tls-key-file go together", prefix)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: a.TLSServerName}
	var err error
	if a.TLSCAFile != "" {
		if cfg.RootCAs, err = loadPool(prefix+"-tls-ca-file", a.TLSCAFile); err != nil {
			return nil, err
		}
	}
	if a.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(a.TLSCertFile, a.TLSKeyFile)
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
func (c *Config) newStore(cfg cluster.Config, auth *RedisAuth) (*cluster.Store, error) {
	cfg.MaxTimeout = max(c.Timeout, policy.MaxTimeout)
	auth.set(&cfg)
	cfg.Tracer = c.tracer
	cfg.Logger = c.Logger // nil: slog.Default(), as the App
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
