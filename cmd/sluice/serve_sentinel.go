package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/limit"
)

// sentinelFlags are the serve flags for a primary watched by Redis
// Sentinel: --sentinel NAME@host:port[,host:port…] and the sentinels' own
// credentials, which may differ from the primary's (--store-user,
// --store-pass-file). --store-tls* apply to the sentinels and the primary
// alike: go-redis dials both with one TLS configuration.
type sentinelFlags struct {
	sentinel                       string
	sentinelUser, sentinelPassFile string
	sentinelPass, masterName       string   // resolved
	sentinelAddrs                  []string // resolved
}

func (s *sentinelFlags) registerSentinel(fs *flag.FlagSet) {
	fs.StringVar(&s.sentinel, "sentinel", "", "a primary watched by Redis Sentinel: NAME@host:port[,host:port…] (the master name and the sentinels)")
	fs.StringVar(&s.sentinelUser, "sentinel-user", "", "ACL user of the sentinels (or SLUICE_SENTINEL_USER); default none")
	fs.StringVar(&s.sentinelPassFile, "sentinel-pass-file", "", "file holding the sentinels' password (or SLUICE_SENTINEL_PASS), when they have requirepass")
}

// resolveSentinel parses --sentinel, checks that it is the only store
// flag, and reads the sentinels' credentials.
func (f *serveFlags) resolveSentinel() error {
	s := &f.sentinelFlags
	if s.sentinel == "" {
		if s.sentinelUser != "" || s.sentinelPassFile != "" {
			return errors.New("serve: --sentinel-user and --sentinel-pass-file need --sentinel")
		}
		return nil
	}
	if f.clusterAddrs != "" || f.redisURL != "" {
		return errors.New("serve: --sentinel, --cluster and --redis are exclusive: give one store")
	}
	var err error
	if s.masterName, s.sentinelAddrs, err = parseSentinel(s.sentinel); err != nil {
		return err
	}
	if s.sentinelPass, err = secretFrom("sentinel-pass", "", s.sentinelPassFile, "SLUICE_SENTINEL_PASS"); err != nil {
		return err
	}
	if s.sentinelUser == "" {
		s.sentinelUser = os.Getenv("SLUICE_SENTINEL_USER")
	}
	return nil
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
func (f *serveFlags) openSentinel(timeout time.Duration, obs cluster.Observer) (*cluster.Store, error) {
	s := &f.sentinelFlags
	return f.newStore(cluster.Config{
		MasterName: s.masterName, SentinelAddrs: s.sentinelAddrs,
		SentinelUsername: s.sentinelUser, SentinelPassword: s.sentinelPass,
		Timeout: timeout, Pipelines: f.storePipelines, PerKey: f.storePerKey, Observer: obs,
	}, &f.store)
}

// checkSentinel asks the sentinels for the primary at start. A name they do
// not know, or an error reply such as NOAUTH, is a bad configuration:
// sluice refuses to start. Sentinels that do not answer only get a warning,
// as an unreachable store does: they may come up later, and meanwhile the
// policies answer with on_store_error.
func checkSentinel(ctx context.Context, store limit.Store, f *serveFlags, log *slog.Logger) error {
	cs, ok := store.(*cluster.Store)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	addr, err := cs.SentinelPrimary(ctx, time.Second)
	switch {
	case errors.Is(err, limit.ErrUnavailable):
		log.Warn("no sentinel answered at start; policies answer with on_store_error until one does", "err", err)
	case err != nil:
		return fmt.Errorf("serve: --sentinel %s: %w", f.masterName, err)
	default:
		log.Info("sentinel", "master", f.masterName, "primary", addr, "sentinels", strings.Join(f.sentinelAddrs, ","))
	}
	return nil
}
