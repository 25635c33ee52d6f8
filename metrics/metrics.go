package metrics

import (
	"math"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-rl/sluice/limit"
)

const namespace = "sluice"

// Buckets of sluice_store_latency_seconds: a round trip on a LAN takes
// 0.1–1ms; the default store deadline is 50ms.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// Buckets of sluice_request_duration_seconds: fine around the usual store
// timeouts (50 ms, 100 ms), where the question "within timeout + 20 ms?"
// is asked.
var requestBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .07, .1, .12, .15, .2, .25, .5, 1, 2.5}

// Buckets of sluice_store_commands_per_pipeline, up to cluster's MaxBatch.
var batchBuckets = prometheus.ExponentialBuckets(1, 2, 10) // 1 … 512

// maxSeries bounds each copy-on-write cache of label values. Past it, a new
// combination is still counted, through WithLabelValues, without caching
// (it allocates then); the policy label is bounded apart (MaxPolicyLabels).
const maxSeries = 10000

// Metrics holds sluice's metrics and their registry. The zero value is not
// usable; call New. Its methods are safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	policies  policyLabels // the values of every family's policy label (policy.go)
	decisions *prometheus.CounterVec
	decCache  cache[decisionKey, prometheus.Counter]
	errCache  cache[errorKey, prometheus.Counter]
	corrCache cache[correctionKey, prometheus.Counter]
	tokCache  cache[tokensKey, prometheus.Counter]
	reloads   [2]prometheus.Counter // error, ok
	reloadOK  prometheus.Gauge

	// Store is told of the Redis store's round trips and failed commands
	// (app adapts it to the store's observer).
	Store *StoreMetrics

	requests prometheus.Histogram
}

type decisionKey struct {
	front, policy, by string
	allowed           bool
}

// New returns Metrics with the Go and process collectors and
// sluice_build_info{version} registered.
func New(version string) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m := &Metrics{reg: reg}

	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "build_info",
		Help:        "Always 1; the labels say which sluice this is.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	})
	build.Set(1)

	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "decisions_total",
		Help: "Rate-limit decisions, by the door they came in by (resp, http, grpc), by policy, by the path that decided (store, lease, split, embedded, fallback-open, fallback-closed, fallback-local, overload-open, overload-closed, overload-local, shadow) and by result (allowed or rejected).",
	}, []string{"front", "policy", "decided_by", "result"})
	m.decCache.make = func(k decisionKey) prometheus.Counter {
		return m.decisions.WithLabelValues(k.front, m.policies.label(k.policy), k.by, result(k.allowed))
	}

	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "config_reloads_total",
		Help: "Policy reloads (SIGHUP, RL.POLICY), by result: ok, or error (the last good config was kept).",
	}, []string{"result"})
	m.reloads[0], m.reloads[1] = reloads.WithLabelValues("error"), reloads.WithLabelValues("ok")
	m.reloadOK = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "config_last_reload_successful",
		Help: "1 when the last policy reload succeeded, or none was tried; 0 when it failed.",
	})
	m.reloadOK.Set(1)

	m.requests = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "request_duration_seconds",
		Help:    "sluice's own time for a request: from reading the pipeline it came in to writing its replies (time in socket buffers before sluice reads is not included); one sample per command.",
		Buckets: requestBuckets,
	})
	m.Store = newStoreMetrics()
	reg.MustRegister(build, m.decisions, reloads, m.reloadOK,
		m.Store.latency, m.Store.batch, m.Store.errors, m.Store.overload, m.requests)
	reg.MustRegister(m.newPolicyFamilies()...)
	return m
}

func result(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "rejected"
}

// Registry is where the metrics are registered, for Register and tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Register adds a collector of the caller's to the registry.
func (m *Metrics) Register(c prometheus.Collector) error { return m.reg.Register(c) }

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Decision counts one decision; it is limiter.Config.OnDecision. It does
// not allocate once the (front, policy, decided_by, result) combination has been
// seen.
func (m *Metrics) Decision(front string, p *limit.Policy, r *limit.Result) {
	m.decCache.get(decisionKey{front, policyName(p), r.DecidedBy, r.Allowed}).Inc()
}

// Pipeline records the time from reading a pipeline of commands commands
// to writing its replies: one sample per command, all of that duration.
func (m *Metrics) Pipeline(d time.Duration, commands int) {
	v := d.Seconds()
	for range commands {
		m.requests.Observe(v)
	}
}

// RequestDurations returns the histogram of sluice_request_duration_seconds
// as cumulative counts: counts[i] requests took at most bounds[i] seconds;
// the last bound is +Inf.
func (m *Metrics) RequestDurations() (bounds []float64, counts []uint64) {
	var out dto.Metric
	if err := m.requests.Write(&out); err != nil {
		return nil, nil
	}
	h := out.GetHistogram()
	for _, b := range h.GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
		counts = append(counts, b.GetCumulativeCount())
	}
	return append(bounds, math.Inf(1)), append(counts, h.GetSampleCount())
}

// ConfigReload counts one reload of the policies, from a file or from
// RL.POLICY; ok is whether the new policies took effect.
//
// The gauge is set before the counter moves: a scrape that sees the count
// of a reload sees its result too (the other order let one see the
// failed reload counted and last_reload_successful still 1).
func (m *Metrics) ConfigReload(ok bool) {
	if ok {
		m.reloadOK.Set(1)
		m.reloads[1].Inc()
		return
	}
	m.reloadOK.Set(0)
	m.reloads[0].Inc()
}

// StoreMetrics are the Redis store's metrics: round trips by node, and
// failed commands by node and kind, overloads apart.
type StoreMetrics struct {
	latency *prometheus.HistogramVec
	batch   *prometheus.HistogramVec
	errors  *prometheus.CounterVec
	// overload counts the decisions a node had no room for (kind
	// overload): a surge, not a fault, so apart from the errors.
	overload  *prometheus.CounterVec
	overloads cache[string, prometheus.Counter]
	nodes     cache[string, nodeMetrics]
	errs      cache[nodeKind, prometheus.Counter]
}

type nodeMetrics struct{ latency, batch prometheus.Observer }

type nodeKind struct{ node, kind string }

func newStoreMetrics() *StoreMetrics {
	s := &StoreMetrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "store", Name: "latency_seconds",
			Help:    "Round trips of one pipeline to a Redis node, answered or not.",
			Buckets: latencyBuckets,
		}, []string{"node"}),
		batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "store", Name: "commands_per_pipeline",
			Help:    "Script calls sent in one pipeline to a Redis node: how well concurrent requests are batched.",
			Buckets: batchBuckets,
		}, []string{"node"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "store", Name: "errors_total",
			Help: "Commands to a Redis node that failed or were sent back, by kind: timeout, connection, cluster_down, tryagain, moved_ask, noscript, breaker_open, redis_error, unacked (a durable spend no replica acknowledged in time).",
		}, []string{"node", "kind"}),
		overload: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "overload_total",
			Help: "Decisions not sent to a Redis node, or answered late, because the node's queue would have outlasted their deadline while the node kept answering; decided by the policy's on_overload.",
		}, []string{"node"}),
	}
	s.overloads.make = func(node string) prometheus.Counter { return s.overload.WithLabelValues(node) }
	s.nodes.make = func(node string) nodeMetrics {
		return nodeMetrics{latency: s.latency.WithLabelValues(node), batch: s.batch.WithLabelValues(node)}
	}
	s.errs.make = func(k nodeKind) prometheus.Counter { return s.errors.WithLabelValues(k.node, k.kind) }
	return s
}

// Pipeline records one round trip to node of d, carrying commands.
func (s *StoreMetrics) Pipeline(node string, d time.Duration, commands int) {
	n := s.nodes.get(node)
	n.latency.Observe(d.Seconds())
	n.batch.Observe(float64(commands))
}

// Error counts one failed command to node, of kind (timeout,
// connection, …: the store's words).
func (s *StoreMetrics) Error(node, kind string) { s.errs.get(nodeKind{node, kind}).Inc() }

// Overload counts one decision node had no room for: a surge, not a
// fault, so apart from the errors.
func (s *StoreMetrics) Overload(node string) { s.overloads.get(node).Inc() }

// cache maps label values to their metric. Reads are one atomic load and
// one map lookup; a miss copies the map under mu.
type cache[K comparable, V any] struct {
	m    atomic.Pointer[map[K]V]
	mu   sync.Mutex
	make func(K) V
}

func (c *cache[K, V]) get(k K) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	var n int
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
		n = len(*old)
	}
	v := c.make(k)
	if n >= maxSeries {
		return v
	}
	m := make(map[K]V, n+1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[k] = v
	c.m.Store(&m)
	return v
}

// CollectPolicies reports n() at every scrape as sluice_policies: the
// policies in force.
func (m *Metrics) CollectPolicies(n func() int) error {
	return m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "policies",
		Help: "Policies in force: the file's and the runtime ones (RL.POLICY).",
	}, func() float64 { return float64(n()) }))
}
