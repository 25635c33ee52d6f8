// Package client is a typed Go client for sluice over go-redis: one method
// per command (Take, TakeWithReceipt, Peek, MTake, Reset, Acquire,
// Release, Adjust), each returning a Decision with time.Duration fields
// instead of RESP integers.
//
// A refusal is not an error: Take returns a Decision with Allowed false and
// a nil error. Errors are what sluice answered with an error reply (as
// *Error, which matches the sentinels ErrNoPolicy, ErrInvalid, ErrAuth and
// ErrNotApplicable under errors.Is) or what go-redis could not deliver
// (the connection's own error, unchanged).
//
// The client sends the commands of sluice's command reference
// (docs/commands.md in the repository) and nothing else: it keeps no
// state, caches nothing and never retries, so a Client is as safe for
// concurrent use as the go-redis client under it. Point it at sluice with
// a plain *redis.Client (sluice is one endpoint, not a Redis Cluster; a
// *redis.ClusterClient would ask it for CLUSTER SLOTS). Commands sent
// through a go-redis pipeline are batched by sluice like any pipelined
// RESP.
//
// It is a module of its own, github.com/sluice-rl/sluice/client, that
// requires go-redis only, and it must not import sluice's server-side
// packages: a service that links it gets go-redis and this package,
// nothing else (docs/client.md).
package client
