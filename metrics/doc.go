// Package metrics is sluice's Prometheus instrumentation: one
// prometheus.Registry per process (never the global default), fed by the
// hooks of the limiter (Decision, DecisionError, Correction) and of the
// Redis store (Store, which app adapts to the store's observer), and by
// collectors that read at scrape time the counters the other packages
// already keep (breakers, hot keys, the deny cache, the RESP server, the
// limiter, a region): CollectSnapshot with the caller's table of Counter.
//
// The hooks run on the hot path: they look their metric up in a
// copy-on-write map keyed by the label values and do not allocate once a
// label combination has been seen. The package decides nothing and serves
// nothing but Handler; it must not reach back into the decision path, nor
// import the packages it reports on (server, cluster, hotkey, denycache,
// region): they or app declare what is read, in their own types.
package metrics
