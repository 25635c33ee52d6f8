// Package localredis starts and stops real Redis servers from the redis-server
// and redis-cli binaries on loopback ports: a Redis Cluster (Start) or one
// plain server (StartSingle). It is the one launcher of local Redis:
// `sluice-lab cluster up|down` uses Up and Down to leave a cluster running
// between two invocations, the labs and `sluice-lab bench` start their
// clusters with it, and tests reach it through internal/redistest, which
// adds t.Cleanup. The server binary, cmd/sluice, never links it.
//
// Every node listens on 127.0.0.1 only, with persistence off, so a node that
// is killed and restarted comes back with its cluster identity (nodes.conf)
// but without data or script cache. Node lets a test break the cluster for
// real: Pause (SIGSTOP), Resume, Kill (SIGKILL), Restart; Cluster waits for
// the outcome by polling Redis (WaitHealthy, WaitNewPrimary), never by
// sleeping.
//
// The faults of a nemesis, each waited for by polling too:
//   - Config.Netns puts the whole cluster in a network namespace of its own
//     (Linux, root), one veth pair per node, so that Node.SetLink can cut one
//     node off from this process and everything else in the root namespace
//     (no reply, no reset) while it still talks to the other nodes;
//   - Cluster.MoveSlot moves a slot live (MIGRATING/IMPORTING, MIGRATE in
//     batches, SETSLOT NODE), or step by step through SlotMove;
//   - Cluster.HoldReplication holds a primary's replication stream back, so
//     that a kill loses the writes since, and Cluster.Takeover promotes a
//     replica by CLUSTER FAILOVER TAKEOVER;
//   - Cluster.RestartEmpty restarts a primary with no data and no replica to
//     take its place.
//
// What it must not do: signal a process it did not start (Stop and Kill act
// on the processes this value spawned; Down checks /proc/<pid> before it
// signals a pid read from a state file; a leftover namespace's servers are
// killed only once the process that made it is gone), listen on anything
// but loopback or, with Config.Netns, a veth address that only this host
// reaches, or leave servers behind when a test binary dies (children get
// Pdeathsig SIGKILL on Linux unless Config.Detach is set). It knows nothing
// of sluice: it imports no other sluice package.
//
// When redis-server is not on PATH, Start and StartSingle return ErrNoRedis.
//
// StartSentinel starts the other shape of Redis with failover: one primary
// and its replicas, watched by redis-sentinel processes (Sentinel), for
// `sluice serve --sentinel`; it also needs the redis-sentinel binary.
package localredis
