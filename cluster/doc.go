// Package cluster is the Redis store of sluice, on go-redis/v9: a Redis
// Cluster (ClusterClient), a single node, or a primary with its replicas
// under Redis Sentinel (a failover client that follows the promotion). It
// maps user keys to hash-tagged Redis keys, runs the scripts of package lua
// with EVALSHA (EVAL once on NOSCRIPT), groups a batch into one pipeline per node, keeps one circuit
// breaker per node, and tells connectivity failures (limit.ErrUnavailable,
// a closed list: isConnectivity) from everything else, which is a bug to
// surface.
//
// It must not decide what happens when Redis is unreachable (the limiter
// does), and it must never replay a command that may have run: only
// NOSCRIPT, MOVED and ASK, which Redis answers without running anything,
// are sent again.
package cluster
