package app

import (
	"strings"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// storeMode is which store the server decides with; its text is INFO's
// store: field, /readyz's and the start log's.
type storeMode string

// The store modes, one per store flag; embedded when none is given.
const (
	modeEmbedded storeMode = "embedded" // in-process: no --cluster, --redis or --sentinel
	modeCluster  storeMode = "cluster"  // --cluster
	modeRedis    storeMode = "redis"    // --redis
	modeSentinel storeMode = "sentinel" // --sentinel
)

// The Redis store has every capability the server asks a store for; a
// method that changed its signature would otherwise turn its feature off
// without a word.
var (
	_ pinger         = (*cluster.Store)(nil)
	_ sentinelAsker  = (*cluster.Store)(nil)
	_ nodeStatser    = (*cluster.Store)(nil)
	_ breakerStater  = (*cluster.Store)(nil)
	_ unackedCounter = (*cluster.Store)(nil)
	_ replicaChecker = (*cluster.Store)(nil)
	_ policyKeeper   = (*cluster.Store)(nil)
)

// openStore picks the store: a cluster, a single node, a primary under
// Sentinel, or in-process.
func (c *Config) openStore(timeout time.Duration, obs cluster.Observer) (limit.Store, storeMode, error) {
	switch {
	case c.Sentinel != "":
		s, err := c.openSentinel(timeout, obs)
		return s, modeSentinel, err
	case c.Cluster != "":
		s, err := c.newStore(cluster.Config{Addrs: strings.Split(c.Cluster, ","), Timeout: timeout, Pipelines: c.StorePipelines, PerKey: c.StorePerKey, Observer: obs}, &c.Store)
		return s, modeCluster, err
	case c.Redis != "":
		u := c.Redis
		if !strings.Contains(u, "://") {
			u = "redis://" + u
		}
		s, err := c.newStore(cluster.Config{URL: u, Timeout: timeout, Pipelines: c.StorePipelines, PerKey: c.StorePerKey, Observer: obs}, &c.Store)
		return s, modeRedis, err
	}
	return local.New(local.Config{DecidedBy: limit.ByEmbedded}), modeEmbedded, nil
}

func sourceOf(path string) string {
	if path == "" {
		return "built-in"
	}
	return path
}
