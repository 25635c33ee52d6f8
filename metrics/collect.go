package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Counter is one value read at scrape time from a snapshot S of the
// counters another package keeps anyway (the hot-key layer's, the deny
// cache's, the RESP server's, the limiter's, a region's): its full name,
// its help, and how to read it from S. The caller declares them, so this
// package imports none of those packages. A name that ends in _total is
// a counter, any other a gauge, a level now (keys hot, connections
// open): Prometheus's naming rule, which promlint checks.
type Counter[S any] struct {
	Name, Help string
	Read       func(S) int64
}

// CollectSnapshot registers on m one collector that takes a snapshot at
// every scrape and reports each of counters from it, with labels (nil:
// none): the values of one scrape are of one moment.
func CollectSnapshot[S any](m *Metrics, labels prometheus.Labels, snapshot func() S, counters []Counter[S]) error {
	descs := make([]*prometheus.Desc, len(counters))
	for i, c := range counters {
		descs[i] = prometheus.NewDesc(c.Name, c.Help, nil, labels)
	}
	return m.reg.Register(collectorFunc{descs, func(ch chan<- prometheus.Metric) {
		s := snapshot()
		for i, c := range counters {
			kind := prometheus.GaugeValue
			if strings.HasSuffix(c.Name, "_total") {
				kind = prometheus.CounterValue
			}
			ch <- prometheus.MustNewConstMetric(descs[i], kind, float64(c.Read(s)))
		}
	}})
}

// The breaker states of sluice_breaker_state.
var breakerValues = map[string]float64{"closed": 0, "half-open": 1, "open": 2}

// CollectBreakers reports states (the Redis store's breaker of each node:
// closed, half-open or open) at every scrape as sluice_breaker_state{node}:
// 0 closed, 1 half-open, 2 open.
func (m *Metrics) CollectBreakers(states func() map[string]string) error {
	desc := prometheus.NewDesc(namespace+"_breaker_state",
		"Circuit breaker of a Redis node: 0 closed (requests flow), 1 half-open (one probe in flight), 2 open (requests fail fast to on_store_error).",
		[]string{"node"}, nil)
	return m.reg.Register(collectorFunc{[]*prometheus.Desc{desc}, func(ch chan<- prometheus.Metric) {
		for node, st := range states() {
			v, ok := breakerValues[st]
			if !ok {
				v = 2
			}
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, node)
		}
	}})
}

// collectorFunc is a prometheus.Collector of fixed descriptions whose
// values are read at scrape time.
type collectorFunc struct {
	descs   []*prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }
