package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
	"github.com/sluice-rl/sluice/policy"
)

// durabilityCheck is what the store of mode asks of every policy beyond
// the config's rules (policy.Runtime.Check): the embedded store has no
// replica, so it refuses durability: replica, at start, on reload and by
// RL.POLICY SET (docs/durability.md). nil for the Redis stores.
func durabilityCheck(mode storeMode) func(*limit.Policy) (string, error) {
	if mode != modeEmbedded {
		return nil
	}
	return func(p *limit.Policy) (string, error) { return "durability", local.CheckDurability(p) }
}

// replicaChecker is a store that can tell which primaries have no
// replica connected (cluster.Store).
type replicaChecker interface {
	PrimariesWithoutReplica(ctx context.Context) ([]string, error)
}

// warnDurability warns, when a policy in force has durability: replica,
// of every primary with no replica connected now: a replica may attach
// later, but until one does every durable spend on that primary is
// answered by its policy's on_store_error. A store that does not answer
// is warned of by checkStore already.
func warnDurability(ctx context.Context, store limit.Store, set *policy.Set, log *slog.Logger) {
	rc, ok := store.(replicaChecker)
	if !ok {
		return
	}
	var durable []string
	for _, p := range set.Policies {
		if p.Durable() {
			durable = append(durable, p.Name)
		}
	}
	if len(durable) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	bare, err := rc.PrimariesWithoutReplica(ctx)
	if err != nil {
		return
	}
	if len(bare) > 0 {
		log.Warn("durability: replica, but no replica is connected to these primaries; until one is, every durable spend on them is answered by on_store_error",
			"primaries", strings.Join(bare, ","), "policies", strings.Join(durable, ","))
	}
}

// unackedCounter is a store that counts, by policy, the durable spends no
// replica acknowledged in time (cluster.Store).
type unackedCounter interface {
	Unacked() map[string]int64
}

// unackedCollector is sluice_durability_unacked_total{policy}, read from
// the store at scrape time.
type unackedCollector struct {
	desc *prometheus.Desc
	read func() map[string]int64
}

func newUnackedCollector(us unackedCounter) *unackedCollector {
	return &unackedCollector{
		desc: prometheus.NewDesc("sluice_durability_unacked_total",
			"Spends of durability: replica policies that no replica acknowledged in time (WAIT), by policy: each was answered by the policy's on_store_error.",
			[]string{"policy"}, nil),
		read: us.Unacked,
	}
}

func (c *unackedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *unackedCollector) Collect(ch chan<- prometheus.Metric) {
	for name, n := range c.read() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), name)
	}
}

// writeDurabilityInfo appends durability_unacked, the total of
// sluice_durability_unacked_total, to INFO's # Sluice section.
func writeDurabilityInfo(w io.Writer, store limit.Store) {
	us, ok := store.(unackedCounter)
	if !ok {
		return
	}
	var n int64
	for _, v := range us.Unacked() {
		n += v
	}
	fmt.Fprintf(w, "durability_unacked:%d\r\n", n)
}
