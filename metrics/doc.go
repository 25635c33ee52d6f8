// Package metrics is sluice's Prometheus instrumentation: one
// prometheus.Registry per process (never the global default), fed by the
// hooks of the limiter (Decision, DecisionError) and of the cluster store
// (Store), and by collectors that read the counters the other packages
// already keep (breakers, hot keys, the RESP server) at scrape time.
//
// The hooks run on the hot path: they look their metric up in a
// copy-on-write map keyed by the label values and do not allocate once a
// label combination has been seen. The package decides nothing and serves
// nothing but Handler; it must not reach back into the decision path.
package metrics
