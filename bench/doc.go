// Package bench measures what sluice costs: it runs redis-benchmark against
// sluice (RL.TAKE) and, alternately, straight at the Redis Cluster shards
// (EVALSHA of the same token-bucket script with the same policy), and
// reports requests per second, latency, the CPU Redis spends per decision on
// each side and the CPU sluice spends per decision.
//
// Run does it all in one call: it starts a local Redis Cluster
// (internal/localredis) and a `sluice serve` child process unless it is given
// running ones, loads the script on every primary, checks with one call of
// each command that the replies have the expected shape, runs the rounds,
// and writes a markdown table and an SVG bar chart.
//
// Every run is checked, not only timed: redis-benchmark 7 stops at the first
// error reply (and Run fails with its output), a sluice run must be decided
// by the store for every request (INFO decided_by_store; in the hot-lease
// scenario by the store or a leased token, decided_by_store +
// decided_by_lease), and a direct uniform run must reach every primary
// (INFO commandstats), so a benchmark cannot quietly measure fallback
// answers or one shard.
//
// HotLab is `sluice lab hot`, the hot-tenant experiment: one key driven by
// go-redis pipelines through several sluice children in front of one
// cluster, once per hot-key mode (strict, split, lease), reporting
// requests/s, p99, admitted against the budget limit + rate × elapsed, and
// the decided_by counts of the replies.
//
// What it must not do: put wall-clock thresholds in tests, signal a process
// it did not start (the sluice child and the cluster are stopped by their
// own pids), or run without a bound (every redis-benchmark run has a request
// count and Config.RunTimeout). CPU is read from /proc, so the CPU columns
// are Linux-only; elsewhere they read n/a.
package bench
