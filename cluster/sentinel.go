package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/limit"
)

// A Store on Redis Sentinel is a single-node store whose one client is
// go-redis's failover client: every new connection asks a sentinel for the
// primary's address (SENTINEL GET-MASTER-ADDR-BY-NAME), and on
// +switch-master the client closes its connections to the old primary. So
// the rest of the store sees one node whatever the primary is: one queue and
// one breaker, keyed by the client (its Options().Addr is go-redis's fixed
// "FailoverClient"), which survive a failover. What a failover looks like
// from here, measured with real sentinels (sentinel_test.go):
//
//   - after a crash, connection refused or reset (or a timeout, when the
//     primary hangs instead) until the sentinels promote a replica: all
//     connectivity, so the requests go to on_store_error;
//   - after SENTINEL FAILOVER, the old primary closes its clients as it
//     turns into a replica (EOF), and a request that reaches it meanwhile
//     gets READONLY: connectivity too;
//   - the promoted replica has no script cache: NOSCRIPT, then EVAL on it,
//     as after any restart.
//
// Replication is asynchronous: the spends of the last moments before a
// crash may not have reached the replica that is promoted, so a failover
// can hand back a few tokens. docs/sentinel.md states it.

// newFailoverClient is the failover client of cfg, with the same timeouts
// (sockets bounded by MaxTimeout, a command without a deadline given one of
// Timeout) and never-replay rule as the other clients of the store.
func newFailoverClient(cfg Config) (*redis.Client, error) {
	if cfg.MasterName == "" || len(cfg.SentinelAddrs) == 0 {
		return nil, errors.New("cluster: Sentinel needs both MasterName and SentinelAddrs")
	}
	for _, a := range cfg.SentinelAddrs {
		if h, p, err := net.SplitHostPort(a); err != nil || h == "" || p == "" {
			return nil, fmt.Errorf("cluster: sentinel address %q: want host:port", a)
		}
	}
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: cfg.MasterName, SentinelAddrs: cfg.SentinelAddrs,
		SentinelUsername: cfg.SentinelUsername, SentinelPassword: cfg.SentinelPassword,
		// the store's settings, as in s.opts: sockets bounded by MaxTimeout,
		// never replay (a timed-out script may have run)
		Username: cfg.Username, Password: cfg.Password,
		DialTimeout: cfg.MaxTimeout, ReadTimeout: cfg.MaxTimeout, WriteTimeout: cfg.MaxTimeout,
		ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: cfg.PoolSize, DisableIdentity: true,
		Protocol: nodeProtocol,
		// One configuration for the sentinels and the primary; an empty
		// ServerName is the host dialed, as crypto/tls fills it in.
		TLSConfig: cfg.TLS,
	})
	c.AddHook(defaultDeadline(cfg.Timeout))
	return c, nil
}

// ErrUnknownPrimary is returned (wrapped) by SentinelPrimary when the
// sentinels that answered know no primary by the store's MasterName.
var ErrUnknownPrimary = errors.New("no primary by that name")

// errNotSentinel is SentinelPrimary's error for a store of another kind.
var errNotSentinel = errors.New("cluster: not a Sentinel store")

// SentinelPrimary asks the sentinels, one after the other, for the address
// of the primary, and returns the first address named: for the start-up log
// and to refuse a bad configuration at start. A name no answering sentinel
// knows gives ErrUnknownPrimary, and an error reply (NOAUTH, WRONGPASS…) is
// returned as it is; when no sentinel answers at all the error is a
// *limit.UnavailableError. Each sentinel gets at most timeout (0 means 1s),
// within ctx.
func (s *Store) SentinelPrimary(ctx context.Context, timeout time.Duration) (string, error) {
	cfg := s.cfg
	if len(cfg.SentinelAddrs) == 0 {
		return "", errNotSentinel
	}
	if timeout <= 0 {
		timeout = time.Second
	}
	var replied, unreachable []error
	for _, addr := range cfg.SentinelAddrs {
		sc := redis.NewSentinelClient(&redis.Options{
			Addr: addr, Username: cfg.SentinelUsername, Password: cfg.SentinelPassword, TLSConfig: cfg.TLS,
			DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, ContextTimeoutEnabled: true,
			MaxRetries: -1, DisableIdentity: true,
		})
		a, err := sc.GetMasterAddrByName(ctx, cfg.MasterName).Result()
		_ = sc.Close()
		switch {
		case err == nil && len(a) == 2:
			return net.JoinHostPort(a[0], a[1]), nil
		case errors.Is(err, redis.Nil):
			replied = append(replied, fmt.Errorf("sentinel %s: %w %q", addr, ErrUnknownPrimary, cfg.MasterName))
		case err == nil:
			replied = append(replied, fmt.Errorf("sentinel %s: unexpected reply %q", addr, a))
		case isConnectivity(err):
			unreachable = append(unreachable, fmt.Errorf("sentinel %s: %w", addr, err))
		default:
			replied = append(replied, fmt.Errorf("sentinel %s: %w", addr, err))
		}
	}
	if len(replied) > 0 {
		return "", errors.Join(replied...)
	}
	return "", &limit.UnavailableError{Node: "sentinels", Err: errors.Join(unreachable...)}
}
