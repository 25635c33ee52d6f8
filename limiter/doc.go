// Package limiter is the decision path of sluice: for each request it finds
// the policy, asks the store under the deadline, and when the store cannot
// answer (limit.ErrUnavailable: a timeout, a refused connection, the store's
// circuit breaker open (cluster/breaker.go), CLUSTERDOWN) applies the
// policy's on_store_error: admit, reject, or decide with an in-process
// bucket holding this instance's share.
//
// Each operation has a path of its own, in its own file, which checks its
// requests and counts its answers:
//
//   - take.go: RL.TAKE, RL.PEEK and CL.THROTTLE (Decide, ThrottlePolicy);
//     Decide takes RL.ADJUST's requests too, in the same batch;
//   - adjust.go: RL.ADJUST (checked and counted for Decide);
//   - multi.go: RL.MTAKE, all-or-nothing (MTake);
//   - concurrency.go: RL.ACQUIRE and RL.RELEASE (Acquire, Release).
//
// The rate paths share one store call, decide.go: a batch of checked
// requests goes once to the hot-key path, the deny cache and the store,
// then through the failure or overload policy and shadow mode; a pipeline
// that mixes takes and adjusts is one batch to the store.
//
// It must not know how the store talks to Redis, and it must never turn an
// error that Redis answered (a script error, WRONGTYPE, NOAUTH) into an
// admit: those come back as errors.
package limiter
