// Package localredis starts and stops real Redis servers from the redis-server
// and redis-cli binaries on loopback ports: a Redis Cluster (Start) or one
// plain server (StartSingle). It is the one launcher of local Redis: `sluice
// cluster up|down` uses Up and Down to leave a cluster running between two
// invocations, `sluice lab` and `sluice bench` start their clusters with it,
// and tests reach it through internal/redistest, which adds t.Cleanup.
//
// Every node listens on 127.0.0.1 only, with persistence off, so a node that
// is killed and restarted comes back with its cluster identity (nodes.conf)
// but without data or script cache. Node lets a test break the cluster for
// real: Pause (SIGSTOP), Resume, Kill (SIGKILL), Restart; Cluster waits for
// the outcome by polling Redis (WaitHealthy, WaitNewPrimary), never by
// sleeping.
//
// What it must not do: signal a process it did not start (Stop and Kill act
// on the processes this value spawned; Down checks /proc/<pid> before it
// signals a pid read from a state file), listen on anything but loopback, or
// leave servers behind when a test binary dies (children get Pdeathsig
// SIGKILL on Linux unless Config.Detach is set). It knows nothing of sluice:
// it imports no other sluice package.
//
// When redis-server is not on PATH, Start and StartSingle return ErrNoRedis.
//
// StartSentinel starts the other shape of Redis with failover: one primary
// and its replicas, watched by redis-sentinel processes (Sentinel), for
// `sluice serve --sentinel`; it also needs the redis-sentinel binary.
package localredis
