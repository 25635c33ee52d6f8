// Package limiter is the decision path of sluice: for each request it finds
// the policy, asks the store under the deadline, and when the store cannot
// answer (limit.ErrUnavailable: a timeout, a refused connection, the store's
// circuit breaker open (cluster/breaker.go), CLUSTERDOWN) applies the
// policy's on_store_error: admit, reject, or decide with an in-process
// bucket holding this instance's share.
//
// It must not know how the store talks to Redis, and it must never turn an
// error that Redis answered (a script error, WRONGTYPE, NOAUTH) into an
// admit: those come back as errors.
package limiter
