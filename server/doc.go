// Package server is sluice's RESP front end: it accepts client connections,
// reads each request once (guard.go: the limits, the framing and the
// arguments in one scan), validates commands (RL.TAKE, RL.PEEK,
// RL.RESET and the connection and introspection commands that redis-cli,
// redis-benchmark, go-redis and redis-py send on their own), batches the
// RL.TAKE and RL.PEEK requests of each client pipeline into one
// Decider.Decide call, and encodes the replies (with tidwall/redcon's
// Append functions).
//
// It also protects the process from its clients: MaxClients, a cap on the
// size of one request enforced before it is buffered (see guard.go),
// AUTH, idle timeouts, recovery from handler panics, and a graceful
// Shutdown that lets in-flight pipelines finish.
//
// The package must know nothing of Redis the store, policies or
// algorithms: decisions come from the Decider interface declared here,
// which the limiter package implements. It never logs per request and takes
// no global lock on the command path.
package server
