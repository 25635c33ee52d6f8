// Package redistest gives tests real Redis servers: NewCluster, NewSingle
// and NewSentinel (a primary, replicas and redis-sentinel processes) start
// them from internal/localredis for one test and stop them in t.Cleanup, and
// NewTLSFiles writes a test CA and certificates.
//
// When redis-server (or redis-sentinel) is not on PATH the test is skipped, except when the CI
// environment variable is set: there it fails, so a CI job cannot pass by
// testing nothing. Under -short (make unit) each of them skips the test,
// Redis or not, and SkipShort does the same for a test that needs Redis, root
// or podman by another road (a lab, a sluice binary in front of a cluster).
// It holds only what needs a testing.TB; the launcher itself (used by
// `sluice-lab cluster up`, the labs and these helpers) is localredis.
package redistest
