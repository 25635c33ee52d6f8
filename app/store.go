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
func (f *Config) openStore(timeout time.Duration, obs cluster.Observer) (limit.Store, string, error) {
	switch {
	case f.Sentinel != "":
		s, err := f.openSentinel(timeout, obs)
		return s, "sentinel", err
	case f.Cluster != "":
		s, err := f.newStore(cluster.Config{Addrs: strings.Split(f.Cluster, ","), Timeout: timeout, Pipelines: f.StorePipelines, PerKey: f.StorePerKey, Observer: obs}, &f.Store)
		return s, "cluster", err
	case f.Redis != "":
		u := f.Redis
		if !strings.Contains(u, "://") {
			u = "redis://" + u
		}
		s, err := f.newStore(cluster.Config{URL: u, Timeout: timeout, Pipelines: f.StorePipelines, PerKey: f.StorePerKey, Observer: obs}, &f.Store)
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
