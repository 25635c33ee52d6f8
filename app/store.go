package app

import (
	"strings"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// openStore picks the store: a cluster, a single node, a primary under
// Sentinel, or in-process.
func (c *Config) openStore(timeout time.Duration, obs cluster.Observer) (limit.Store, string, error) {
	switch {
	case c.Sentinel != "":
		s, err := c.openSentinel(timeout, obs)
		return s, "sentinel", err
	case c.Cluster != "":
		s, err := c.newStore(cluster.Config{Addrs: strings.Split(c.Cluster, ","), Timeout: timeout, Pipelines: c.StorePipelines, PerKey: c.StorePerKey, Observer: obs}, &c.Store)
		return s, "cluster", err
	case c.Redis != "":
		u := c.Redis
		if !strings.Contains(u, "://") {
			u = "redis://" + u
		}
		s, err := c.newStore(cluster.Config{URL: u, Timeout: timeout, Pipelines: c.StorePipelines, PerKey: c.StorePerKey, Observer: obs}, &c.Store)
		return s, "redis", err
	}
	return local.New(local.Config{DecidedBy: limit.ByEmbedded}), "embedded", nil
}

func sourceOf(path string) string {
	if path == "" {
		return "built-in"
	}
	return path
}
