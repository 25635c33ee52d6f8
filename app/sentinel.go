package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/limit"
)

// parseSentinel fills in the master name and the sentinels of
// --sentinel NAME@host:port[,host:port…], when given. The sentinels' own
// credentials (--sentinel-user, --sentinel-pass-file) may differ from the
// primary's (--store-user, --store-pass-file); --store-tls* apply to the
// sentinels and the primary alike: go-redis dials both with one TLS
// configuration.
func (c *Config) parseSentinel() error {
	if c.Sentinel == "" {
		return nil
	}
	var err error
	c.masterName, c.sentinelAddrs, err = parseSentinel(c.Sentinel)
	return err
}

// parseSentinel reads NAME@host:port[,host:port…].
func parseSentinel(v string) (string, []string, error) {
	bad := func(why string) error {
		return fmt.Errorf("serve: --sentinel %q: %s; want NAME@host:port[,host:port…], e.g. mymaster@10.0.0.1:26379,10.0.0.2:26379", v, why)
	}
	name, list, ok := strings.Cut(v, "@")
	switch {
	case !ok:
		return "", nil, bad("no '@' after the master name")
	case name == "":
		return "", nil, bad("empty master name")
	case strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return "", nil, bad("the master name holds a space or a control character")
	}
	var addrs []string
	for _, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			return "", nil, bad(fmt.Sprintf("sentinel address %q is not host:port", a))
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", nil, bad(fmt.Sprintf("sentinel address %q has no port in 1..65535", a))
		}
		addrs = append(addrs, a)
	}
	return name, addrs, nil
}

// openSentinel is the store of --sentinel.
func (c *Config) openSentinel(timeout time.Duration, obs cluster.Observer) (*cluster.Store, error) {
	return c.newStore(cluster.Config{
		MasterName: c.masterName, SentinelAddrs: c.sentinelAddrs,
		SentinelUsername: c.SentinelUser, SentinelPassword: c.SentinelPass,
		Timeout: timeout, Pipelines: c.StorePipelines, PerKey: c.StorePerKey, Observer: obs,
	}, &c.Store)
}

// sentinelAsker is a store under Sentinel that can ask the sentinels for
// the primary (cluster.Store).
type sentinelAsker interface {
	SentinelPrimary(ctx context.Context, timeout time.Duration) (string, error)
}

// checkSentinel asks the sentinels for the primary at start. A name they do
// not know, or an error reply such as NOAUTH, is a bad configuration:
// sluice refuses to start. Sentinels that do not answer only get a warning,
// as an unreachable store does: they may come up later, and meanwhile the
// policies answer with on_store_error.
func checkSentinel(ctx context.Context, store limit.Store, c *Config, log *slog.Logger) error {
	sa, ok := store.(sentinelAsker)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	addr, err := sa.SentinelPrimary(ctx, time.Second)
	switch {
	case errors.Is(err, limit.ErrUnavailable):
		log.Warn("no sentinel answered at start; policies answer with on_store_error until one does", "err", err)
	case err != nil:
		return fmt.Errorf("serve: --sentinel %s: %w", c.masterName, err)
	default:
		log.Info("sentinel", "master", c.masterName, "primary", addr, "sentinels", strings.Join(c.sentinelAddrs, ","))
	}
	return nil
}
